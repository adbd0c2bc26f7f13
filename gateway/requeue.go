package gateway

import (
	"cmp"
	"context"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"sync"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"go.opentelemetry.io/otel/trace"
)

// A sync request that queues for admission waits through a wait, which
// the service keeps in a registry while it is queued (and only then: a
// request admitted at once never touches it), so that a new catalog
// reaches it. Applying a catalog moves each waiting request whose
// model's platform models it changed (one added, removed, reordered by
// priority, or no longer able to serve the request) to its new list, at
// the place the request stood in arrival order: the move takes the
// waiter out of the engine and queues the same work again with the new
// candidates and its place (admission.Position.Place,
// admission.Request.Place), as task.Service.Replan moves queued tasks.
// The engine's contract is unchanged, so every home does the same. A
// move is not an attempt of the request's retry budget and not a new
// wait: its deadline, its queue span and its queue-wait observation are
// the wait's.
//
// A moved request routes in the new catalog from then on (Call.Snapshot
// and Call.Model): its new platform models are known only there (their
// adapters, prices, encodings and call timeouts), and one catalog
// decides each of its targets. What Prepare granted it (its tenant,
// priority, deadline, run mode and pin) stays, as does what its earlier
// attempts tried. A request its model's new list cannot serve (none
// left, or only platform models it already tried) keeps the candidates
// it waits with, as does one whose model left the catalog.

// waitResult is how a waiter's wait ended.
type waitResult struct {
	lease admission.Lease
	err   error
}

// wait is one request's wait for a lease.
type wait struct {
	ctx context.Context // the request's
	c   *Call
	r   *routing
	// ch has the outcome of the request's wait: the waiter in force's,
	// or the error that kept a move from queueing its replacement.
	ch chan waitResult
	// base is the first waiter's id; a move's waiter is base~n.
	base string

	mu  sync.Mutex
	req admission.Request // the waiter in force
	// st is the catalog the request routes in (c.Snapshot, which only a
	// move changes, holding busy).
	st    *Snapshot
	moves int
	// busy: a move is being planned or made (by Apply, or by the
	// request itself). gone: the request stopped waiting (its context
	// ended). done: the wait is over.
	busy, gone, done bool
	// old is the waiter a move is replacing, until its cancel returns;
	// stash is its outcome if that came meanwhile: the cancel's, or
	// what ended it first (then the move is off and it is the wait's).
	old   string
	stash *waitResult
}

// notify is the engine's notify of w's waiter id: it passes the outcome
// of the waiter in force on, keeps that of one being replaced for the
// move (makeMove), and gives back a lease granted to one already
// replaced (which a move's cancel rules out: this holds the line).
func (s *Service) notify(w *wait, id string) func(admission.Lease, error) {
	return func(l admission.Lease, err error) {
		w.mu.Lock()
		switch id {
		case w.req.ID:
			w.mu.Unlock()
			w.ch <- waitResult{l, err}
			return
		case w.old:
			w.stash = &waitResult{l, err}
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		if err == nil {
			_ = s.deps.Engine.Release(context.WithoutCancel(w.ctx), l.ID, l.Owner)
		}
	}
}

// waitRegistry holds the waits of the requests queued now.
type waitRegistry struct {
	mu sync.Mutex
	m  map[*wait]struct{}
}

func (g *waitRegistry) add(w *wait) {
	g.mu.Lock()
	if g.m == nil {
		g.m = make(map[*wait]struct{})
	}
	g.m[w] = struct{}{}
	g.mu.Unlock()
}

func (g *waitRegistry) remove(w *wait) {
	g.mu.Lock()
	delete(g.m, w)
	g.mu.Unlock()
}

func (g *waitRegistry) all() []*wait {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*wait, 0, len(g.m))
	for w := range g.m {
		out = append(out, w)
	}
	return out
}

// await queues w's waiter (tryAdmit's), c's routed by r, and waits for
// its outcome until ctx ends; a lease granted after that goes back. span,
// if not nil, is told where the waiter stood when it queued: the scope it
// waited on, its position there and how many waited. While it waits, a
// new catalog may move it; one whose candidates a new catalog retired
// before a move reached it (it was queueing as the catalog changed)
// queues again in that catalog.
func (s *Service) await(ctx context.Context, w *wait, span trace.Span) (admission.Lease, error) {
	w.ctx, w.ch = ctx, make(chan waitResult, 1)
	s.waits.add(w)
	defer s.waits.remove(w)
	for {
		res := s.queue(ctx, w, span)
		lost := errors.Is(res.err, admission.ErrNoCandidate) || errors.Is(res.err, admission.ErrUnknownScope)
		if !lost || ctx.Err() != nil || !s.reroute(w) {
			w.mu.Lock()
			w.done = true
			w.mu.Unlock()
			return res.lease, res.err
		}
		span = nil // where it stood first
	}
}

// queue queues w's waiter in force and waits for the outcome of w's
// wait, as await says. The waiting request's goroutine parks here, so
// the queueing is enqueue's: its locals and the engine's calls take
// room on the stack only until they return.
func (s *Service) queue(ctx context.Context, w *wait, span trace.Span) waitResult {
	if err := s.enqueue(ctx, w, span); err != nil {
		return waitResult{err: err}
	}
	select {
	case res := <-w.ch:
		return res
	case <-ctx.Done():
		return s.stopWait(w)
	}
}

// enqueue queues w's waiter in force, tells span where it stands, and
// moves it if a catalog applied since its request was routed asks.
//
//go:noinline
func (s *Service) enqueue(ctx context.Context, w *wait, span trace.Span) error {
	w.mu.Lock()
	req := w.req
	w.mu.Unlock()
	if err := s.deps.Engine.Enqueue(ctx, req, s.notify(w, req.ID)); err != nil {
		return err
	}
	if span != nil {
		s.spanQueued(ctx, span, req.ID)
	}
	// A catalog applied since c was routed, whose moves passed before
	// this waiter was queued.
	s.moveWait(w)
	return nil
}

// spanQueued tells span where waiter id stands: the scope it waits on,
// its position there and how many wait. Like moveWait, it is not
// inlined, so that enqueue's frame, below the engine's on the stack,
// stays small.
//
//go:noinline
func (s *Service) spanQueued(ctx context.Context, span trace.Span, id string) {
	if pos, err := s.deps.Engine.Position(ctx, id); err == nil {
		span.SetAttributes(attrQueueScope.String(pos.Scope), attrQueuePosition.Int(pos.Ahead+1), attrQueueQueued.Int(pos.Queued))
	}
}

// stopWait ends the wait of a request that is gone: it cancels the
// waiter in force (or leaves that to the move under way: endMove), and
// gives back a lease granted meanwhile.
func (s *Service) stopWait(w *wait) waitResult {
	w.mu.Lock()
	w.gone = true
	busy, id := w.busy, w.req.ID
	w.mu.Unlock()
	if !busy {
		_ = s.deps.Engine.Cancel(context.WithoutCancel(w.ctx), id)
	}
	if res := <-w.ch; res.err == nil {
		_ = s.deps.Engine.Release(context.WithoutCancel(w.ctx), res.lease.ID, res.lease.Owner)
	}
	return waitResult{err: w.ctx.Err()}
}

// moveWait moves w, if it should, to the catalog served now, and again
// if that changed meanwhile (an Apply that found w busy left it here).
//
//go:noinline
func (s *Service) moveWait(w *wait) {
	st := s.state.Load()
	for {
		if m, ok := s.planMove(w, st); ok {
			s.makeMove(m, false)
		}
		next := s.state.Load()
		if next == st {
			return
		}
		st = next
	}
}

// moveWaitsLocked moves the requests waiting now whose model's platform
// models changed in st, the catalog just stored, to st's. They move in
// the engine's order (priority, then place), so that none finds, on a
// platform model new to it, one that arrived after it already moved
// there. It returns how many moved. The caller holds applyMu.
func (s *Service) moveWaitsLocked(st *Snapshot) int {
	var moves []move
	for _, w := range s.waits.all() {
		if m, ok := s.planMove(w, st); ok {
			moves = append(moves, m)
		}
	}
	slices.SortFunc(moves, func(a, b move) int {
		return cmp.Or(cmp.Compare(b.prio, a.prio), cmp.Compare(a.place, b.place))
	})
	for _, m := range moves {
		s.makeMove(m, true)
	}
	return len(moves)
}

// move is a waiting request's move to catalog st, where its model is
// model and its platform models pms; it stands at place.
type move struct {
	w     *wait
	st    *Snapshot
	model weir.Model
	pms   []string
	place uint64
	prio  int32
}

// planMove plans w's move to catalog st, holding w busy until makeMove
// ends it; false, w left as it was, if it stays.
func (s *Service) planMove(w *wait, st *Snapshot) (move, bool) {
	w.mu.Lock()
	if st == nil || w.busy || w.gone || w.done || w.st == st {
		w.mu.Unlock()
		return move{}, false
	}
	w.busy = true
	from, id, prio := w.st, w.req.ID, w.req.Priority
	w.mu.Unlock()
	m, ok := s.retargetOf(w, from, st)
	if !ok {
		s.endMove(w)
		return move{}, false
	}
	pos, err := s.deps.Engine.Position(w.ctx, id)
	if err != nil {
		s.endMove(w) // admitted or ended meanwhile
		return move{}, false
	}
	m.place, m.prio = pos.Place, prio
	return m, true
}

// retargetOf is w's move from catalog from to st, with no place: false
// if its model's platform models there are those it has (or none it can
// use). The caller holds w busy.
func (s *Service) retargetOf(w *wait, from, st *Snapshot) (move, bool) {
	c, r := w.c, w.r
	m, ok := st.Model(c.Model.Name)
	if !ok || routedAlike(from, st, m) {
		return move{}, false
	}
	pms, _ := s.platformModels(c, st, m)
	if len(pms) == 0 || !r.untried(pms) || samePlatformModels(r.platformModels(), pms, m) {
		return move{}, false
	}
	return move{w: w, st: st, model: m, pms: pms}, true
}

// reroute routes w's request, whose waiter is no longer queued, in the
// catalog served now, as a move would have, for it to queue again there
// (arriving now). It reports whether it did.
func (s *Service) reroute(w *wait) bool {
	st := s.state.Load()
	w.mu.Lock()
	if st == nil || w.busy || w.st == st {
		w.mu.Unlock()
		return false
	}
	w.busy = true
	from := w.st
	w.mu.Unlock()
	defer s.endMove(w)
	m, ok := s.retargetOf(w, from, st)
	if !ok {
		return false
	}
	budgets, ok := s.prepareMove(m, false)
	if !ok {
		return false
	}
	w.mu.Lock()
	req := w.req
	w.moves++
	req.ID = w.base + "~" + strconv.Itoa(w.moves)
	w.mu.Unlock()
	s.retarget(m, req, budgets)
	return true
}

// makeMove makes m: it cancels the waiter in force and queues its
// replacement with m's candidates at its place, unless the waiter's wait
// ended first. locked says the caller holds applyMu.
func (s *Service) makeMove(m move, locked bool) {
	w := m.w
	defer s.endMove(w)
	budgets, ok := s.prepareMove(m, locked)
	if !ok {
		return
	}
	w.mu.Lock()
	if w.gone || w.done {
		w.mu.Unlock()
		return
	}
	old := w.req
	next := old
	w.moves++
	next.ID = w.base + "~" + strconv.Itoa(w.moves)
	w.req.ID, w.old = next.ID, old.ID
	w.mu.Unlock()
	if err := s.deps.Engine.Cancel(context.WithoutCancel(w.ctx), old.ID); err != nil {
		// Admitted or ended meanwhile: that outcome is the wait's.
		w.mu.Lock()
		w.req, w.old = old, ""
		res := w.stash
		w.stash = nil
		w.mu.Unlock()
		if res != nil {
			w.ch <- *res
		}
		if !errors.Is(err, admission.ErrNotQueued) {
			s.logger(w.c).Warn("a waiting request keeps its candidates: it could not be taken out of the queue", "error", err)
		}
		return
	}
	w.mu.Lock()
	res := w.stash
	w.mu.Unlock()
	if res != nil && res.err == nil {
		// A cancelled waiter's outcome is ErrCancelled: this holds the
		// line if a home said otherwise.
		_ = s.deps.Engine.Release(context.WithoutCancel(w.ctx), res.lease.ID, res.lease.Owner)
	}
	next = s.retarget(m, next, budgets)
	if err := s.deps.Engine.Enqueue(w.ctx, next, s.notify(w, next.ID)); err != nil {
		w.ch <- waitResult{err: err}
	}
}

// prepareMove readies the engine for m's candidates (their acceptance
// copies, their budgets' windows) and returns the budgets the request
// reserves against there; false, logged, if it could not. locked says
// the caller holds applyMu.
func (s *Service) prepareMove(m move, locked bool) (requestBudgets, bool) {
	w, c := m.w, m.w.c
	if c.RunMode == weir.RunAcceptance {
		var err error
		if locked {
			err = s.ensureAcceptanceScopesLocked(w.ctx, m.st, m.pms)
		} else {
			err = s.ensureAcceptanceScopes(w.ctx, m.pms)
		}
		if err != nil {
			s.logger(c).Warn("a waiting request keeps its candidates: the acceptance copies of its new ones could not be made", "error", err)
			return requestBudgets{}, false
		}
	}
	budgets, err := s.withPlatformModels(w.ctx, w.r.budgets, m.pms)
	if err != nil {
		s.logger(c).Warn("a waiting request keeps its candidates: the budgets of its new ones could not be set", "error", err)
		return requestBudgets{}, false
	}
	return budgets, true
}

// retarget makes w's request route in m's catalog, on m's platform
// models reserving against budgets, and makes req, given those
// candidates and m's place, w's waiter in force, which it returns. No
// waiter of the request may be queued: nothing else reads its routing
// until req is.
func (s *Service) retarget(m move, req admission.Request, budgets requestBudgets) admission.Request {
	w, c, r := m.w, m.w.c, m.w.r
	c.Snapshot, c.Model = m.st, m.model
	r.setPlatformModels(m.pms)
	r.budgets = budgets
	req.Candidates = r.candidates(r.resolve())
	req.Hold = s.holdOf(c, r.current())
	req.Place = m.place
	if req.Resolve != nil {
		req.Spec = r.spec()
	}
	w.mu.Lock()
	w.req, w.st, w.old, w.stash = req, m.st, "", nil
	w.mu.Unlock()
	return req
}

// endMove ends a move's hold on w, and cancels w's waiter if its request
// went away meanwhile (stopWait left that to the move).
func (s *Service) endMove(w *wait) {
	w.mu.Lock()
	w.busy = false
	gone, id := w.gone, w.req.ID
	w.mu.Unlock()
	if gone {
		_ = s.deps.Engine.Cancel(context.WithoutCancel(w.ctx), id)
	}
}

// routedAlike reports whether model m of catalog b is routed as in
// catalog a: the same model, and each of its candidates the same
// platform model in both.
func routedAlike(a, b *Snapshot, m weir.Model) bool {
	was, ok := a.models[m.Name]
	if !ok || !reflect.DeepEqual(was, m) {
		return false
	}
	for _, cd := range m.Candidates {
		x, inA := a.pms[cd.PlatformModel]
		y, inB := b.pms[cd.PlatformModel]
		if inA != inB || !reflect.DeepEqual(x, y) || a.kinds[x.Platform] != b.kinds[y.Platform] {
			return false
		}
	}
	return true
}

// samePlatformModels reports whether a and b, lists of platform models
// of model m, hold the same ones in the same order of m's priorities
// (the order within equal priorities is the router's draw, not the
// catalog's).
func samePlatformModels(a, b []string, m weir.Model) bool {
	if len(a) != len(b) {
		return false
	}
	prio := func(pm string) (int, bool) {
		i := slices.IndexFunc(m.Candidates, func(cd weir.Candidate) bool { return cd.PlatformModel == pm })
		if i < 0 {
			return 0, false
		}
		return m.Candidates[i].Priority, true
	}
	for i := range a {
		pa, okA := prio(a[i])
		pb, okB := prio(b[i])
		if !okA || !okB || pa != pb || !slices.Contains(b, a[i]) {
			return false
		}
	}
	return true
}

// platformModels are r's platform models.
func (r *routing) platformModels() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pms
}

// setPlatformModels makes pms r's platform models.
func (r *routing) setPlatformModels(pms []string) {
	r.mu.Lock()
	r.pms = pms
	r.mu.Unlock()
}

// untried reports whether one of pms is not among those r tried.
func (r *routing) untried(pms []string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(pms, func(pm string) bool { return !r.tried[pm] })
}
