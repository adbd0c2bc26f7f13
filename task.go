package weir

import (
	"fmt"
	"time"
)

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
	// UpstreamSite identifies the platform the upstream job was submitted
	// to (the planner's task.Target.Site: who and where, without
	// secrets), recorded with UpstreamID: a job is followed there to its
	// end, even once its platform model was repointed elsewhere or
	// removed. Empty for tasks submitted before it was kept, and for
	// simulated ones.
	UpstreamSite string
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
	// RunMode is how it runs: production (""), simulation, where the
	// platform model's simulator answers its upstream calls, or
	// acceptance, in the scopes of the run RunID ("" in the others).
	RunMode RunMode
	RunID   string
	// TraceParent is the W3C traceparent of the request that submitted
	// it, "" if that was not traced: the task's later spans join its
	// trace. Set at creation and never changed.
	TraceParent string
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
	UpstreamSite  string
	Result        []byte
	ErrorCode     string
	ErrorMessage  string
	Attempts      *int
	AdmittedAt    time.Time
	FinishedAt    time.Time
	// ClearUpstream empties UpstreamID, UpstreamSite and Result, whatever those fields
	// say: the task's failed upstream job is left behind for a new one.
	ClearUpstream bool
}

// TaskState is a task as a listing of states reads it: its place in
// submission order, its id and its status, without its request or its
// result.
type TaskState struct {
	Seq    int64
	ID     string
	Status TaskStatus
}

// TaskFilter selects tasks for listing. Deleted tasks are never listed.
type TaskFilter struct {
	KeyID string
	// Kind, if set, selects the tasks that came through one API ("video",
	// "task"); Model, the tasks of one public model.
	Kind     string
	Model    string
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

// ValidateNew reports what a store refuses in a task it is asked to
// create: every store applies these rules, so they are stated once.
func (t *Task) ValidateNew() error {
	switch {
	case t.ID == "" || t.KeyID == "" || t.Kind == "" || t.Model == "":
		return fmt.Errorf("%w: id, key id, kind and model are required", ErrInvalid)
	case !t.Status.Valid():
		return fmt.Errorf("%w: unknown status %q", ErrInvalid, t.Status)
	case t.CreatedAt.IsZero():
		return fmt.Errorf("%w: no creation time", ErrInvalid)
	case t.Attempts < 0:
		return fmt.Errorf("%w: negative attempts", ErrInvalid)
	case !t.DeletedAt.IsZero():
		return fmt.Errorf("%w: a new task cannot be deleted", ErrInvalid)
	case !t.CallbackGoneAt.IsZero():
		return fmt.Errorf("%w: a new task's callback cannot be gone", ErrInvalid)
	case !t.RunMode.Valid():
		return fmt.Errorf("%w: unknown run mode %q", ErrInvalid, t.RunMode)
	case (t.RunMode == RunAcceptance) != (t.RunID != ""), t.RunID != "" && !ValidRunID(t.RunID):
		return fmt.Errorf("%w: run id %q with run mode %q: an acceptance run needs a valid id, another mode none", ErrInvalid, t.RunID, t.RunMode)
	}
	for _, e := range t.CallbackEvents {
		if !e.Valid() {
			return fmt.Errorf("%w: unknown callback event %q", ErrInvalid, e)
		}
	}
	return nil
}

// Validate reports what a store refuses in an update.
func (u TaskUpdate) Validate() error {
	if len(u.From) == 0 {
		return fmt.Errorf("%w: no status to update from", ErrInvalid)
	}
	for _, s := range u.From {
		if !s.Valid() {
			return fmt.Errorf("%w: unknown status %q in From", ErrInvalid, s)
		}
		if s.Terminal() {
			return fmt.Errorf("%w: from %s: a terminal status is never left", ErrInvalid, s)
		}
	}
	if !u.Status.Valid() {
		return fmt.Errorf("%w: unknown status %q", ErrInvalid, u.Status)
	}
	if u.Attempts != nil && *u.Attempts < 0 {
		return fmt.Errorf("%w: negative attempts", ErrInvalid)
	}
	return nil
}

// Validate reports what a store refuses in a listing's filter.
func (f TaskFilter) Validate() error {
	if f.Limit < 0 {
		return fmt.Errorf("%w: negative limit %d", ErrInvalid, f.Limit)
	}
	if f.BeforeSeq < 0 {
		return fmt.Errorf("%w: negative BeforeSeq %d", ErrInvalid, f.BeforeSeq)
	}
	for _, s := range f.Statuses {
		if !s.Valid() {
			return fmt.Errorf("%w: unknown status %q", ErrInvalid, s)
		}
	}
	return nil
}
