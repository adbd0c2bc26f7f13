package console

import (
	"context"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/gateway"
)

// The services the console shows and acts through, each declared here by
// the role it plays, so that a test can stand a fake in for one.

// Gateway is what the console shows of the gateway: the catalog served,
// the scopes and their queues, and the upstreams paused.
type Gateway interface {
	// Snapshot is the catalog served; nil before one is applied.
	Snapshot() *gateway.Snapshot
	Scopes(ctx context.Context) []gateway.ScopeView
	// ScopeQueue is the waiters (up to max) and leases of one scope.
	ScopeQueue(ctx context.Context, scope string, max int) (admission.QueueView, error)
	// Paused are the platform models paused, until when.
	Paused() map[string]time.Time
}

// Operator is what the console's actions change: a waiter taken out of
// its queue, a platform model drained, a scope's limit set.
type Operator interface {
	CancelWaiter(ctx context.Context, id string) error
	Drain(ctx context.Context, platformModel string, on bool) error
	SetScopeLimit(ctx context.Context, scope string, limit int64) error
}

// Tasks is the task front as the tasks view uses it: any key's tasks,
// where a queued one stands, its callbacks, and cancelling one.
type Tasks interface {
	// Get is a task; gateway.ErrTaskNotFound if it is not there.
	Get(ctx context.Context, id string) (weir.Task, error)
	List(ctx context.Context, f weir.TaskFilter) ([]weir.Task, error)
	Cancel(ctx context.Context, id string) (weir.Task, error)
	Position(ctx context.Context, id string) (admission.Position, bool)
	Deliveries(ctx context.Context, id string) ([]gateway.TaskDelivery, error)
}

// Spend sums what requests cost, from the usage records, for the spend
// view; weir.SpendStore implements it.
type Spend interface {
	SpendReport(ctx context.Context, f weir.SpendReportFilter) ([]weir.SpendRow, error)
	SpendSum(ctx context.Context, f weir.SpendFilter) (weir.Money, error)
}

// Budgets lists the budgets in force for the spend view: those the
// store keeps (the admin API's, the CLI's) and the applied catalog's
// (the config file's), which serve merges.
type Budgets interface {
	Budgets(ctx context.Context) ([]weir.Budget, error)
}

var (
	_ Spend    = weir.SpendStore(nil)
	_ Gateway  = (*gateway.Service)(nil)
	_ Operator = (*gateway.Service)(nil)
	_ Tasks    = (*gateway.Tasks)(nil)
)
