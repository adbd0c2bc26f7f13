package fleet

import "github.com/weir-gateway/weir/admission"

// SpecResolver reads the Spec of a waiter of another replica
// (admission.Request.Spec) once, and returns what resolves it to its
// candidates now, as that replica's Resolve would.
type SpecResolver = func(spec []byte) (func() []admission.Candidate, error)

// OnResolve sets f to read, while this replica leads, the Specs of
// other replicas' waiters: a node that connected after a waiter arrived
// becomes one of its candidates. A waiter's Spec is read once, at its
// first re-resolution; the engine calls f and what it returns under its
// lock: they must not call the engine, nor block. nil: such waiters keep
// the candidates they arrived with.
func (e *Engine) OnResolve(f SpecResolver) {
	if f == nil {
		e.specs.Store(nil)
		return
	}
	e.specs.Store(&f)
}

// added is a lease the leader granted on a candidate it added to w, as
// this replica holds it: the candidate appended to w's, and the lease's
// Candidate its index there. A lease on one of the candidates w arrived
// with is returned as it is. Only a waiter queued at another replica's
// leader, which cannot ask its Resolve, can be granted an added one.
func added(w *wireRequest, l admission.Lease) (*wireRequest, admission.Lease) {
	if w == nil || l.Candidate < len(w.Candidates) {
		return w, l
	}
	c := *w
	c.Candidates = append(w.Candidates[:len(w.Candidates):len(w.Candidates)],
		admission.Candidate{Needs: l.Needs, Tokens: l.Tokens, Cost: l.Cost})
	l.Candidate = len(c.Candidates) - 1
	return &c, l
}
