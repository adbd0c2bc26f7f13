package fleet

import "github.com/weir-gateway/weir/admission"

// OnResolve sets f to resolve, while this replica leads, the Spec of a
// waiter of another replica (admission.Request.Spec) to its candidates
// now, as that replica's Resolve would: a node that connected after the
// waiter arrived becomes one of its candidates. The engine calls f under
// its lock: f must not call the engine, nor block. nil: such waiters keep
// the candidates they arrived with.
func (e *Engine) OnResolve(f func(spec []byte) ([]admission.Candidate, error)) {
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
