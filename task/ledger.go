package task

import (
	"context"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// ledger is the admission side of the service's tasks as this process
// reaches it: the term that holds their waiters and leases (term.go),
// and what the service's steps tell it. A service alone keeps its own
// term, from Start to Stop (soloLedger, solo.go); in a fleet the term of
// the replica that leads keeps it for every replica, which tell it what
// changed through notices (fleetLedger, fleet.go; the leader's side in
// lead.go). New picks one.
type ledger interface {
	// start begins the admission side as the service starts, and starts
	// River's workers with workers once their steps may run; stop ends
	// it, tm its term when the service stopped (nil: none), once they
	// have stopped.
	start(ctx context.Context, workers func(context.Context) error) error
	stop(tm *term)
	// submit queues task t, just stored, as req. It returns the error
	// of a task that could not queue, which it has ended (t is then as
	// the store has it).
	submit(ctx context.Context, t *weir.Task, req admission.Request) error
	// hold makes sure the lease of task t, whose step runs here, is
	// held.
	hold(ctx context.Context, t weir.Task) error
	// done hears that the run of task id here is done with its
	// admission: the task ended, or, with back, went back to the queue.
	done(ctx context.Context, id string, back *sentBack)
	// cancel cancels task t, which had not ended when read; msg is
	// its error message (why).
	cancel(ctx context.Context, t weir.Task, msg string) (weir.Task, error)
	// passing reports whether err, which kept a queued task from
	// queueing, leaves it queued for the ledger to queue again rather
	// than ending it.
	passing(err error) bool
}

// sentBack is how a task its worker sent back to the queue queues
// again: at once on others — req's candidates but those of the
// platforms that refused it since it last queued for all of them
// (refused) — if there are any; otherwise on all of them once after has
// passed. failed says the refusals were failures (5xx, unreachable)
// rather than a full platform.
type sentBack struct {
	req     admission.Request
	refused []string
	others  []admission.Candidate
	after   time.Duration
	failed  bool
}
