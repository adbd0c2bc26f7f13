// Package weir holds Weir's domain: the catalog (platforms, platform models,
// public models, groups), API keys, usage records, and the Store interface
// that the storage packages (sqlite, later postgres) implement. It imports
// only the standard library; everything that talks to the outside world
// lives in a subpackage and depends inward.
package weir

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors for the domain. Storage and API layers wrap them.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
	ErrInvalid  = errors.New("invalid")
)

// ModelKind is what a public model serves, which decides the endpoints it
// answers on.
type ModelKind string

const (
	KindChat       ModelKind = "chat"
	KindEmbeddings ModelKind = "embeddings"
	KindImages     ModelKind = "images"
	KindSpeech     ModelKind = "audio_speech"
	// KindVideo models run as durable asynchronous tasks (the video API
	// and the generic task API).
	KindVideo ModelKind = "video"
)

// Async reports whether k's requests run as durable tasks.
func (k ModelKind) Async() bool { return k == KindVideo }

// Valid reports whether k is a known kind.
func (k ModelKind) Valid() bool {
	switch k {
	case KindChat, KindEmbeddings, KindImages, KindSpeech, KindVideo:
		return true
	}
	return false
}

// Platform is one upstream account.
type Platform struct {
	Name string
	// Kind is the adapter: "openai" (any OpenAI-compatible API).
	Kind    string
	BaseURL string
	// APIKey is the credential, read from the environment variable the
	// config names; never stored.
	APIKey string
	// Timeout bounds the wait for an upstream call's response headers
	// (0: the gateway default).
	Timeout time.Duration
	// IdleTimeout bounds each wait for more of an answer once its headers
	// are in: the gap between a stream's chunks (0: the gateway default).
	IdleTimeout time.Duration
	// CallTimeout bounds one upstream call whole, from sending it to the
	// end of its answer (0: the gateway default).
	CallTimeout time.Duration
}

// The admission scopes the catalog makes, by name: every request needs
// its key's, its group's and its platform model's.
func KeyScope(keyID string) string        { return "key:" + keyID }
func GroupScope(group string) string      { return "group:" + group }
func PlatformModelScope(pm string) string { return pmScopePrefix + pm }

const pmScopePrefix = "pm:"

// PlatformModelOfScope returns the platform model a scope is for, and
// whether it is a platform model's scope.
func PlatformModelOfScope(scope string) (string, bool) {
	return strings.CutPrefix(scope, pmScopePrefix)
}

// ScopeLabel names a scope as the catalog's users know it, for messages:
// "platform model up/m", "key key_1", "group default"; any other scope as
// "scope <name>".
func ScopeLabel(scope string) string {
	if pm, ok := PlatformModelOfScope(scope); ok {
		return "platform model " + pm
	}
	if k, ok := strings.CutPrefix(scope, "key:"); ok {
		return "key " + k
	}
	if g, ok := strings.CutPrefix(scope, "group:"); ok {
		return "group " + g
	}
	return "scope " + scope
}

// Limits are the capacity settings shared by platform models, groups and
// keys. Zero means no limit, as in admission.ScopeConfig.
type Limits struct {
	Concurrency    int64
	RPM            int64
	TPM            int64
	QueueLimit     int
	MaxWait        time.Duration
	LeaseTTL       time.Duration
	FairnessWindow time.Duration
}

// PlatformModel is one model on one platform.
type PlatformModel struct {
	// Name identifies it in the catalog, e.g. "openai-main/gpt-4o".
	Name     string
	Platform string
	// Upstream is the model name sent to the platform.
	Upstream string
	Limits
}

// Candidate is one platform model a public model can be served by.
type Candidate struct {
	PlatformModel string
	// Priority orders candidates: higher is tried first. Equal priorities
	// are spread by Weight.
	Priority int
	Weight   int
}

// Model is the public name a client asks for.
type Model struct {
	Name       string
	Kind       ModelKind
	Candidates []Candidate
}

// Group is a class of users with its own limits and default priority.
type Group struct {
	Name     string
	Priority int32
	Limits
	// RoundRobin makes the group's scope share turns between its keys.
	RoundRobin bool
}

// Catalog is everything the gateway serves, as loaded from config.
type Catalog struct {
	Platforms      []Platform
	PlatformModels []PlatformModel
	Models         []Model
	Groups         []Group
}

// Validate checks references and values; it reports the first problem.
func (c *Catalog) Validate() error {
	platforms := map[string]bool{}
	for _, p := range c.Platforms {
		switch {
		case p.Name == "":
			return fmt.Errorf("%w: platform without a name", ErrInvalid)
		case platforms[p.Name]:
			return fmt.Errorf("%w: platform %s defined twice", ErrInvalid, p.Name)
		case p.Kind != "openai":
			return fmt.Errorf("%w: platform %s: unknown kind %q", ErrInvalid, p.Name, p.Kind)
		case p.BaseURL == "":
			return fmt.Errorf("%w: platform %s has no base_url", ErrInvalid, p.Name)
		}
		platforms[p.Name] = true
	}
	pms := map[string]bool{}
	for _, pm := range c.PlatformModels {
		switch {
		case pm.Name == "":
			return fmt.Errorf("%w: platform model without a name", ErrInvalid)
		case pms[pm.Name]:
			return fmt.Errorf("%w: platform model %s defined twice", ErrInvalid, pm.Name)
		case !platforms[pm.Platform]:
			return fmt.Errorf("%w: platform model %s: unknown platform %q", ErrInvalid, pm.Name, pm.Platform)
		case pm.Upstream == "":
			return fmt.Errorf("%w: platform model %s has no upstream model", ErrInvalid, pm.Name)
		}
		if err := pm.Limits.Validate(); err != nil {
			return fmt.Errorf("platform model %s: %w", pm.Name, err)
		}
		pms[pm.Name] = true
	}
	models := map[string]bool{}
	for _, m := range c.Models {
		switch {
		case m.Name == "":
			return fmt.Errorf("%w: model without a name", ErrInvalid)
		case models[m.Name]:
			return fmt.Errorf("%w: model %s defined twice", ErrInvalid, m.Name)
		case !m.Kind.Valid():
			return fmt.Errorf("%w: model %s: unknown kind %q", ErrInvalid, m.Name, m.Kind)
		case len(m.Candidates) == 0:
			return fmt.Errorf("%w: model %s has no candidates", ErrInvalid, m.Name)
		}
		for _, cd := range m.Candidates {
			if !pms[cd.PlatformModel] {
				return fmt.Errorf("%w: model %s: unknown platform model %q", ErrInvalid, m.Name, cd.PlatformModel)
			}
			if cd.Weight < 0 {
				return fmt.Errorf("%w: model %s: negative weight", ErrInvalid, m.Name)
			}
		}
		models[m.Name] = true
	}
	groups := map[string]bool{}
	for _, g := range c.Groups {
		switch {
		case g.Name == "":
			return fmt.Errorf("%w: group without a name", ErrInvalid)
		case groups[g.Name]:
			return fmt.Errorf("%w: group %s defined twice", ErrInvalid, g.Name)
		}
		if err := g.Limits.Validate(); err != nil {
			return fmt.Errorf("group %s: %w", g.Name, err)
		}
		groups[g.Name] = true
	}
	return nil
}

// Validate rejects negative limits.
func (l Limits) Validate() error {
	if l.Concurrency < 0 || l.RPM < 0 || l.TPM < 0 || l.QueueLimit < 0 ||
		l.MaxWait < 0 || l.LeaseTTL < 0 || l.FairnessWindow < 0 {
		return fmt.Errorf("%w: limits must not be negative", ErrInvalid)
	}
	return nil
}

// PlatformModel finds a platform model by name.
func (c *Catalog) PlatformModel(name string) (PlatformModel, bool) {
	for _, pm := range c.PlatformModels {
		if pm.Name == name {
			return pm, true
		}
	}
	return PlatformModel{}, false
}

// APIKey is a client credential. The secret itself is never stored: only
// its SHA-256 hash, and a short prefix to recognise it in listings.
type APIKey struct {
	ID     string
	Name   string
	Prefix string
	Hash   string // hex SHA-256 of the secret
	Group  string
	// Models, if not empty, is the allow-list of public model names.
	Models []string
	// Limits of the key's own scope (concurrency, RPM, TPM, queue limit).
	Limits
	CreatedAt time.Time
	RevokedAt time.Time // zero while active
}

// Active reports whether the key may be used.
func (k APIKey) Active() bool { return k.RevokedAt.IsZero() }

// Allows reports whether the key may use a public model.
func (k APIKey) Allows(model string) bool {
	if len(k.Models) == 0 {
		return true
	}
	for _, m := range k.Models {
		if m == model {
			return true
		}
	}
	return false
}

// Usage is one request's record.
type Usage struct {
	RequestID        string
	KeyID            string
	Model            string
	PlatformModel    string
	Endpoint         string
	PromptTokens     int64
	CompletionTokens int64
	Waited           time.Duration
	Latency          time.Duration
	Status           int
	// Outcome is a low-cardinality word: ok, queue_timeout, queue_full,
	// upstream_error, cancelled...
	Outcome string
	At      time.Time
}

// UsageFilter selects usage records.
type UsageFilter struct {
	KeyID string
	Since time.Time
	Limit int
}

// Store keeps the durable things: keys and usage. The catalog comes from
// the config file. storetest.Exercise states its contract.
type Store interface {
	KeyCreate(ctx context.Context, k APIKey) error
	// KeyByHash finds a key by the hash of its secret, revoked or not.
	KeyByHash(ctx context.Context, hash string) (APIKey, error)
	KeyByID(ctx context.Context, id string) (APIKey, error)
	KeyList(ctx context.Context) ([]APIKey, error)
	// KeyRevoke marks a key revoked; revoking twice is not an error.
	KeyRevoke(ctx context.Context, id string, at time.Time) error

	// UsageInsert records a batch of usage in one transaction.
	UsageInsert(ctx context.Context, batch []Usage) error
	UsageList(ctx context.Context, f UsageFilter) ([]Usage, error)

	Close() error
}

// TaskStatus is where a task is in its life. Terminal states are never
// left: a task that reached one is never changed again.
type TaskStatus string

const (
	// TaskQueued: stored and waiting for admission.
	TaskQueued TaskStatus = "queued"
	// TaskAdmitted: holds capacity and has a job to run; not yet submitted
	// upstream (or the submission is not yet recorded).
	TaskAdmitted TaskStatus = "admitted"
	// TaskRunning: submitted upstream; its upstream id is recorded.
	TaskRunning   TaskStatus = "running"
	TaskSucceeded TaskStatus = "succeeded"
	TaskFailed    TaskStatus = "failed"
	TaskCancelled TaskStatus = "cancelled"
	TaskExpired   TaskStatus = "expired"
)

// Valid reports whether s is one of the statuses above.
func (s TaskStatus) Valid() bool {
	switch s {
	case TaskQueued, TaskAdmitted, TaskRunning:
		return true
	}
	return s.Terminal()
}

// Terminal reports whether s is final.
func (s TaskStatus) Terminal() bool {
	switch s {
	case TaskSucceeded, TaskFailed, TaskCancelled, TaskExpired:
		return true
	}
	return false
}

// TaskEvent names a kind of callback event a task may ask for beyond the
// terminal ones, which every task with a callback URL gets.
type TaskEvent string

const (
	// TaskEventProgress asks for task.running when the task starts
	// upstream and task.progress as its progress advances (throttled by
	// the task service).
	TaskEventProgress TaskEvent = "progress"
)

// Valid reports whether e is a known event kind.
func (e TaskEvent) Valid() bool { return e == TaskEventProgress }

// Task is one unit of asynchronous work: a video, an image, a speech job.
type Task struct {
	ID    string
	KeyID string
	// Kind is the API it came through: "video" or "task".
	Kind  string
	Model string
	// Input is the request body, JSON.
	Input    []byte
	Priority int32
	// Seq is the submission order; admission follows (Priority, Seq).
	Seq    int64
	Status TaskStatus
	// PlatformModel and Candidate say where it was admitted.
	PlatformModel string
	Candidate     int
	Progress      int
	// UpstreamID is the upstream's job id, recorded before anything else
	// once submitted, so that a retried job polls instead of resubmitting.
	UpstreamID string
	// Result is the upstream's final job object, JSON.
	Result       []byte
	ErrorCode    string
	ErrorMessage string
	CallbackURL  string
	// CallbackEvents are the events beyond the terminal ones that the
	// callback URL gets; none: only the terminal event.
	CallbackEvents []TaskEvent
	// CallbackGoneAt is when the callback URL answered 410 Gone: no later
	// event of the task is sent. Zero while it has not.
	CallbackGoneAt time.Time
	// IdempotencyKey makes a repeated submission by the same key return
	// the same task.
	IdempotencyKey string
	// Fingerprint identifies the request that made the task (the API
	// computes it), so that a repeated submission under the same
	// IdempotencyKey can be told from a different request reusing the
	// key. Empty for tasks stored before fingerprints: see SameRequest.
	Fingerprint string
	// Attempts counts task-specific failures retried so far.
	Attempts   int
	CreatedAt  time.Time
	AdmittedAt time.Time
	FinishedAt time.Time
	// Deadline is when a task still queued expires.
	Deadline time.Time
	// DeletedAt is when the client deleted the finished task; zero while
	// not deleted. A deleted task is terminal and stays stored (its
	// idempotency key stays taken), but the API treats it as gone.
	DeletedAt time.Time
}

// WantsEvent reports whether t asked for events of kind e.
func (t Task) WantsEvent(e TaskEvent) bool {
	for _, have := range t.CallbackEvents {
		if have == e {
			return true
		}
	}
	return false
}

// Deleted reports whether the client deleted the task.
func (t Task) Deleted() bool { return !t.DeletedAt.IsZero() }

// SameRequest reports whether a submission with fingerprint fp repeats
// the request that made t. A task without a fingerprint (stored before
// they were kept) matches any request.
func (t Task) SameRequest(fp string) bool { return t.Fingerprint == "" || t.Fingerprint == fp }

// TaskUpdate changes a task if it is in one of From (compare-and-set on
// status); zero fields are left as they are, except Status.
type TaskUpdate struct {
	From          []TaskStatus
	Status        TaskStatus
	PlatformModel string
	Candidate     *int
	Progress      *int
	UpstreamID    string
	Result        []byte
	ErrorCode     string
	ErrorMessage  string
	Attempts      *int
	AdmittedAt    time.Time
	FinishedAt    time.Time
	// ClearUpstream empties UpstreamID and Result, whatever those fields
	// say: the task's failed upstream job is left behind for a new one.
	ClearUpstream bool
}

// TaskFilter selects tasks for listing. Deleted tasks are never listed.
type TaskFilter struct {
	KeyID string
	// Kind, if set, selects the tasks that came through one API ("video",
	// "task").
	Kind     string
	Statuses []TaskStatus
	// AfterSeq and BeforeSeq page: only tasks with a larger Seq, and (if
	// BeforeSeq is positive) a smaller one.
	AfterSeq  int64
	BeforeSeq int64
	// Descending lists the newest (largest Seq) first; a descending page
	// continues with BeforeSeq set to the last Seq it holds.
	Descending bool
	Limit      int
}

// TaskStore keeps tasks. storetest states its contract.
type TaskStore interface {
	// TaskCreate stores a new task and sets its Seq. A task whose key and
	// idempotency key are already stored is not created: the stored one is
	// returned with created false.
	TaskCreate(ctx context.Context, t *Task) (created bool, err error)
	TaskGet(ctx context.Context, id string) (Task, error)
	// TaskList lists in Seq order (ascending, or descending if asked).
	TaskList(ctx context.Context, f TaskFilter) ([]Task, error)
	// TaskUpdate applies u if the task's status is in u.From; it reports
	// whether it did (false, nil: the task had moved on).
	TaskUpdate(ctx context.Context, id string, u TaskUpdate) (bool, error)
	// TaskDelete marks a terminal task deleted at at, if it is not yet;
	// it reports whether it did (false, nil: the task is not terminal, or
	// was already deleted). TaskGet still returns a deleted task, with
	// DeletedAt set; TaskList leaves it out.
	TaskDelete(ctx context.Context, id string, at time.Time) (bool, error)
	// TaskCallbackGone records that the task's callback URL answered 410
	// Gone at at, if it was not recorded yet; it reports whether it did
	// (false, nil: it was already, and the first time stays).
	TaskCallbackGone(ctx context.Context, id string, at time.Time) (bool, error)
	// TaskPurge removes for good up to limit terminal tasks that finished
	// before the given time, oldest first, and returns how many it
	// removed; their idempotency keys are free again.
	TaskPurge(ctx context.Context, finishedBefore time.Time, limit int) (int, error)
}
