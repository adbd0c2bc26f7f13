package weir

import (
	"context"
	"fmt"
	"time"
)

// Store keeps the durable things: keys, usage, budgets and the spend
// journal (reservations of requests not yet ended). The catalog
// comes from the config file. storetest.Exercise states its contract,
// storetest.ExerciseBudgets that of the budgets, and
// storetest.ExerciseSpendJournal that of the reservations.
type Store interface {
	BudgetStore

	KeyCreate(ctx context.Context, k APIKey) error
	// KeyByHash finds a key by the hash of its secret, revoked or not.
	KeyByHash(ctx context.Context, hash string) (APIKey, error)
	KeyByID(ctx context.Context, id string) (APIKey, error)
	KeyList(ctx context.Context) ([]APIKey, error)
	// KeyRevoke marks a key revoked; revoking twice is not an error.
	KeyRevoke(ctx context.Context, p *KeyRevokeParams) error

	// UsageInsert records a batch of usage in one transaction, and in
	// the same transaction deletes the reservations of its requests: a
	// request's usage record settles its reservation.
	UsageInsert(ctx context.Context, batch []Usage) error
	UsageList(ctx context.Context, f UsageFilter) ([]Usage, error)
	// UsageByKey sums the usage recorded since since, by key, in key id
	// order.
	UsageByKey(ctx context.Context, since time.Time) ([]KeyUsage, error)

	// SpendReserve journals a batch of reservations in one transaction:
	// all of it or nothing. A reservation whose request is already
	// journaled, or already has a usage record, is skipped.
	SpendReserve(ctx context.Context, batch []Reservation) error
	// SpendRecover turns up to p.Limit reservations made before
	// p.Before, oldest first, into usage records at their estimate (a
	// request's usage record already stored wins), deletes them, and
	// returns how many it deleted; one transaction.
	SpendRecover(ctx context.Context, p *SpendRecoverParams) (int, error)

	Close() error
}

// KeyRevokeParams say which key Store.KeyRevoke revokes, and when.
type KeyRevokeParams struct {
	// ID is the key's; an unknown ID is ErrNotFound.
	ID string
	// At is when the key stops being usable; the zero time is
	// ErrInvalid. A key revoked before keeps its first time.
	At time.Time
}

// Validate reports what a store refuses: a zero At.
func (p *KeyRevokeParams) Validate() error { return validRevokeTime(p.At) }

// TaskStore keeps tasks. storetest states its contract.
type TaskStore interface {
	// TaskCreate stores a new task and sets its Seq. A task whose key and
	// idempotency key are already stored is not created: the stored one is
	// returned with created false.
	TaskCreate(ctx context.Context, t *Task) (created bool, err error)
	// TaskByIdempotencyKey finds the task that key keyID's submission
	// with idempotencyKey stored (deleted or not), as TaskCreate would
	// return it; ErrNotFound if there is none, or idempotencyKey is empty.
	TaskByIdempotencyKey(ctx context.Context, keyID, idempotencyKey string) (Task, error)
	TaskGet(ctx context.Context, id string) (Task, error)
	// TaskList lists in Seq order (ascending, or descending if asked).
	TaskList(ctx context.Context, f TaskFilter) ([]Task, error)
	// TaskUpdate applies p.Update to task p.ID if the task's status is in
	// p.Update.From; it reports whether it did (false, nil: the task had
	// moved on).
	TaskUpdate(ctx context.Context, p *TaskUpdateParams) (bool, error)
	// TaskDelete marks terminal task p.ID deleted at p.At, if it is not
	// yet; it reports whether it did (false, nil: the task is not
	// terminal, or was already deleted). TaskGet still returns a deleted
	// task, with DeletedAt set; TaskList leaves it out.
	TaskDelete(ctx context.Context, p *TaskDeleteParams) (bool, error)
	// TaskCallbackGone records that task p.ID's callback URL answered 410
	// Gone at p.At, if it was not recorded yet; it reports whether it did
	// (false, nil: it was already, and the first time stays).
	TaskCallbackGone(ctx context.Context, p *TaskCallbackGoneParams) (bool, error)
	// TaskPurge removes for good up to p.Limit terminal tasks that
	// finished before p.FinishedBefore, oldest first, and returns how many
	// it removed; their idempotency keys are free again.
	TaskPurge(ctx context.Context, p *TaskPurgeParams) (int, error)
}

// TaskUpdateParams say which task TaskStore.TaskUpdate changes, and how.
type TaskUpdateParams struct {
	// ID is the task's; an unknown ID is ErrNotFound.
	ID string
	// Update is the change, applied only if the task's status is in its
	// From; an Update that fails Validate is ErrInvalid.
	Update TaskUpdate
}

// TaskDeleteParams say which task TaskStore.TaskDelete marks deleted, and
// when.
type TaskDeleteParams struct {
	// ID is the task's; an unknown ID is ErrNotFound.
	ID string
	// At becomes the task's DeletedAt; the zero time is ErrInvalid.
	At time.Time
}

// Validate reports what a store refuses: a zero At.
func (p *TaskDeleteParams) Validate() error {
	if p.At.IsZero() {
		return fmt.Errorf("%w: no deletion time", ErrInvalid)
	}
	return nil
}

// TaskCallbackGoneParams say whose callback TaskStore.TaskCallbackGone
// records gone, and when.
type TaskCallbackGoneParams struct {
	// ID is the task's; an unknown ID is ErrNotFound.
	ID string
	// At is when the callback URL answered 410 Gone, and becomes the
	// task's CallbackGoneAt; the zero time is ErrInvalid.
	At time.Time
}

// Validate reports what a store refuses: a zero At.
func (p *TaskCallbackGoneParams) Validate() error {
	if p.At.IsZero() {
		return fmt.Errorf("%w: no time", ErrInvalid)
	}
	return nil
}

// TaskPurgeParams say which finished tasks TaskStore.TaskPurge removes.
type TaskPurgeParams struct {
	// FinishedBefore: only terminal tasks whose FinishedAt is before it
	// go; the zero time is ErrInvalid.
	FinishedBefore time.Time
	// Limit is the most tasks one call removes, oldest first; it must be
	// positive (ErrInvalid otherwise). A call that removes Limit may have
	// left more.
	Limit int
}

// Validate reports what a store refuses: a zero FinishedBefore, or a
// Limit that is not positive.
func (p *TaskPurgeParams) Validate() error {
	if p.FinishedBefore.IsZero() || p.Limit <= 0 {
		return fmt.Errorf("%w: a time and a positive limit are required", ErrInvalid)
	}
	return nil
}

// NodeStore keeps edge nodes and the hashes of their tokens.
// storetest.ExerciseNodes states its contract.
type NodeStore interface {
	// NodeCreate stores a new node. A node that fails Validate is
	// ErrInvalid; a taken ID, Name or Hash is ErrConflict. Either way
	// nothing is stored.
	NodeCreate(ctx context.Context, n Node) error
	// NodeByHash finds a node by the hash of its token, revoked or not:
	// the caller checks Active. None is ErrNotFound.
	NodeByHash(ctx context.Context, hash string) (Node, error)
	// NodeByID finds a node by its ID, revoked or not. None is
	// ErrNotFound.
	NodeByID(ctx context.Context, id string) (Node, error)
	// NodeList returns every node, revoked ones included, by Name in byte
	// order.
	NodeList(ctx context.Context) ([]Node, error)
	// NodeRevoke marks a node revoked at p.At; revoking twice is not an
	// error and keeps the first time. An unknown ID is ErrNotFound, a zero
	// time ErrInvalid.
	NodeRevoke(ctx context.Context, p *NodeRevokeParams) error
}

// NodeRevokeParams say which node NodeStore.NodeRevoke revokes, and when.
type NodeRevokeParams struct {
	// ID is the node's; an unknown ID is ErrNotFound.
	ID string
	// At is when the node's token stops being accepted; the zero time is
	// ErrInvalid. A node revoked before keeps its first time.
	At time.Time
}

// Validate reports what a store refuses: a zero At.
func (p *NodeRevokeParams) Validate() error { return validRevokeTime(p.At) }

func validRevokeTime(at time.Time) error {
	if at.IsZero() {
		return fmt.Errorf("%w: no time given", ErrInvalid)
	}
	return nil
}
