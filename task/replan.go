package task

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// Replan gives the tasks queued in this process's term the candidates
// the planner gives them now, so that a reload of the catalog that adds,
// reorders or changes a model's platforms reaches the tasks already
// waiting, as it reaches those submitted after it. (A platform that left
// the catalog needs no replan: the engine drops the candidates that use
// its scope at once.)
//
// A task whose candidates are unchanged is left alone. One whose changed
// is taken out of the engine and queued again with the new ones at the
// place it stood (admission.Position.Place): a replan changes where a
// task may run, never its turn. Platforms that refused the task since it
// last queued for all its candidates stay left out. A task the planner
// can no longer plan keeps the candidates it waits with: the engine
// decides about those as their scopes change. In a fleet only the
// leader's term holds waiters; on another replica Replan does nothing.
//
// Tasks move in the engine's order (priority, then place), so that a
// task never finds, on a platform new to it, a later task moved there
// before it.
//
// It returns how many tasks it moved.
func (s *Service) Replan(ctx context.Context) int {
	tm := s.current()
	if tm == nil {
		return 0
	}
	tm.mu.Lock()
	ids := make([]string, 0, len(tm.waiting))
	for id := range tm.waiting {
		ids = append(ids, id)
	}
	tm.mu.Unlock()
	var moves []move
	for _, id := range ids {
		if ctx.Err() != nil {
			return 0
		}
		m, ok, err := tm.replan(ctx, id)
		if err != nil {
			s.logger.Warn("a queued task keeps its candidates: it could not be planned again", "task", id, "error", err)
		}
		if ok {
			moves = append(moves, m)
		}
	}
	slices.SortFunc(moves, func(a, b move) int {
		return cmp.Or(cmp.Compare(b.req.Priority, a.req.Priority), cmp.Compare(a.place, b.place))
	})
	moved := 0
	for _, m := range moves {
		ok, err := tm.move(ctx, m)
		if err != nil {
			s.logger.Warn("a queued task could not move to its new candidates", "task", m.req.ID, "error", err)
		}
		if ok {
			s.cfg.Metrics.TaskDispatch("replanned")
			moved++
		}
	}
	return moved
}

// move is a queued task's waiter, at place, to be given req's candidates.
type move struct {
	req   admission.Request
	place uint64
}

// replan plans queued task id again and reports whether its candidates
// changed, with its move.
func (tm *term) replan(ctx context.Context, id string) (move, bool, error) {
	s := tm.s
	t, err := s.store.TaskGet(ctx, id)
	if err != nil {
		if errors.Is(err, weir.ErrNotFound) {
			return move{}, false, nil
		}
		return move{}, false, err
	}
	if t.Status != weir.TaskQueued {
		return move{}, false, nil
	}
	req, err := s.request(ctx, t)
	if err != nil {
		return move{}, false, err
	}
	for _, pm := range tm.refusedOf(id) {
		req.Candidates = withoutScope(req.Candidates, weir.PlatformModelScope(pm))
	}
	if len(req.Candidates) == 0 {
		return move{}, false, nil
	}
	tm.mu.Lock()
	old := tm.waiting[id]
	same := old == nil || sameCandidates(old.cands, req.Candidates)
	tm.mu.Unlock()
	if same {
		return move{}, false, nil
	}
	pos, err := tm.engine.Position(ctx, id)
	if err != nil {
		if errors.Is(err, admission.ErrNotQueued) {
			err = nil // admitted meanwhile
		}
		return move{}, false, err
	}
	return move{req: req, place: pos.Place}, true, nil
}

// move takes m's task out of the engine and queues it again with its new
// candidates at its place. It reports whether it did.
func (tm *term) move(ctx context.Context, m move) (bool, error) {
	id := m.req.ID
	// The new waiter is recorded before the old one goes, so the old
	// one's end (ErrCancelled) leaves the task to it.
	w := &waiter{}
	tm.mu.Lock()
	if tm.waiting[id] == nil {
		tm.mu.Unlock()
		return false, nil
	}
	tm.waiting[id] = w
	tm.mu.Unlock()
	if err := tm.engine.Cancel(ctx, id); err != nil {
		// Admitted meanwhile, or the engine would not say: it stays as
		// it was.
		tm.unreserve(id, w)
		if errors.Is(err, admission.ErrNotQueued) {
			err = nil
		}
		return false, err
	}
	m.req.Place = m.place
	if err := tm.enqueueReserved(ctx, m.req, w); err != nil {
		tm.s.requeueFailed(ctx, id, err, tm.later())
		return false, err
	}
	return true, nil
}

// refusedOf are the platform models that refused task id since it last
// queued for all its candidates.
func (tm *term) refusedOf(id string) []string {
	if tm.fleet {
		tm.mu.Lock()
		defer tm.mu.Unlock()
		return slices.Clone(tm.refused[id])
	}
	s := tm.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.refusals[id])
}

// later is how the term queues a task again after a wait: the fleet
// ledger's deferQueue, or the service's enqueueAfter.
func (tm *term) later() func(string, time.Duration) {
	if tm.fleet {
		return tm.deferQueue
	}
	return tm.s.enqueueAfter
}

// sameCandidates reports whether a and b are the same candidates in the
// same order.
func sameCandidates(a, b []admission.Candidate) bool {
	return slices.EqualFunc(a, b, func(x, y admission.Candidate) bool {
		return x.Tokens == y.Tokens && slices.Equal(x.Needs, y.Needs)
	})
}
