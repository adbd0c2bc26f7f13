package gateway

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// servedCall is how a Serve run in the background ended.
type servedCall struct {
	c   *Call
	err error
}

// serveWaiting serves a chat request id of model in the background,
// once the engine says its first waiter (id/0) queued.
func (b *testBundle) serveWaiting(t *testing.T, id, model string) <-chan servedCall {
	t.Helper()
	done := b.serveBackground(t, id, model)
	b.nextEvent(t, admission.OutcomeQueued, id+"/0")
	return done
}

// serveBackground serves a chat request id of model in the background.
func (b *testBundle) serveBackground(t *testing.T, id, model string) <-chan servedCall {
	t.Helper()
	st := b.svc.Snapshot()
	m, _ := st.Model(model)
	k := weir.APIKey{ID: "key_1"}
	if err := b.svc.EnsureKeyScope(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	group, _ := st.GroupOf(k)
	c := &Call{RequestID: id, Path: "/chat/completions",
		Grant: Grant{Snapshot: st, Model: m, KeyID: k.ID, Group: group, Deadline: b.clock.Now().Add(time.Minute), MaxWait: time.Minute},
		Body:  rawBody(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), Tokens: 10}
	done := make(chan servedCall, 1)
	go func() { done <- servedCall{c, b.svc.Serve(t.Context(), c, &recordedAnswer{})} }()
	return done
}

// nextEvent waits for the engine's next event with outcome o of a
// waiter whose id starts with prefix, and returns it. Other events are
// passed over.
func (b *testBundle) nextEvent(t *testing.T, o admission.Outcome, prefix string) admission.Event {
	t.Helper()
	for {
		select {
		case e := <-b.events:
			if e.Outcome == o && strings.HasPrefix(e.WaiterID, prefix) {
				return e
			}
		case <-t.Context().Done():
			t.Fatalf("no event %v of %s", o, prefix)
		}
	}
}

// holdOne takes the one slot of platform model pm, until the test ends.
func (b *testBundle) holdOne(t *testing.T, pm string) {
	t.Helper()
	l, err := b.engine.TryAcquire(t.Context(), admission.Request{ID: "hold " + pm,
		Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: weir.PlatformModelScope(pm), Amount: 1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.engine.Release(t.Context(), l.ID, l.Owner) })
}

// oneSlotEach gives every platform model of c one slot.
func oneSlotEach(c *weir.Catalog) {
	for i := range c.PlatformModels {
		c.PlatformModels[i].Concurrency = 1
	}
}

// await is what a background Serve returned.
func await(t *testing.T, ch <-chan servedCall) servedCall {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-t.Context().Done():
		t.Fatal("Serve did not return")
		return servedCall{}
	}
}

// TestNewCatalogServesWaitersInArrivalOrder: requests waiting on a full
// platform model move to the one a new catalog adds to their model, in
// the order they arrived: the first is served there before a request
// that arrives after the reload, and so is the second.
func TestNewCatalogServesWaitersInArrivalOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) { onlyUp(c); oneSlotEach(c) }})
	b.holdOne(t, "up/m")
	first := b.serveWaiting(t, "req_a", "m")
	second := b.serveWaiting(t, "req_b", "m")
	cat := b.catalog()
	oneSlotEach(&cat)
	if err := b.svc.Apply(t.Context(), cat, ""); err != nil {
		t.Fatal(err)
	}
	later := b.serveBackground(t, "req_c", "m")
	var order []string
	for len(order) < 3 {
		e := b.nextEvent(t, admission.OutcomeAdmitted, "req_")
		if order = append(order, e.WaiterID[:len("req_x")]); order[0] != "req_a" {
			break
		}
	}
	if got := strings.Join(order, " "); got != "req_a req_b req_c" {
		t.Fatalf("admitted in the order %s; want req_a req_b req_c, their arrival", got)
	}
	for _, ch := range []<-chan servedCall{first, second, later} {
		s := await(t, ch)
		if s.err != nil || s.c.Usage.PlatformModel != "up2/m" {
			t.Errorf("%s: Serve %v, served by %q; want up2/m, the new one", s.c.RequestID, s.err, s.c.Usage.PlatformModel)
		}
	}
}

// TestNewCatalogMovesWaiterOffRemovedPlatformModel: a request waiting on
// a platform model the new catalog removes moves to its model's new
// candidate rather than failing for want of one, and the move is not
// one of its attempts (a retry budget of one still serves it).
func TestNewCatalogMovesWaiterOffRemovedPlatformModel(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: Config{RetryBudget: 1}, catalog: func(c *weir.Catalog) { onlyUp(c); oneSlotEach(c) }})
	b.holdOne(t, "up/m")
	waiting := b.serveWaiting(t, "req_a", "m")
	cat := b.catalog()
	cat.PlatformModels = cat.PlatformModels[1:] // up2/m alone
	cat.Models[0].Candidates = cat.Models[0].Candidates[1:]
	if err := b.svc.Apply(t.Context(), cat, ""); err != nil {
		t.Fatal(err)
	}
	s := await(t, waiting)
	if s.err != nil || s.c.Usage.PlatformModel != "up2/m" || s.c.Attempts != 1 {
		t.Fatalf("Serve %v, served by %q after %d attempts; want up2/m after one", s.err, s.c.Usage.PlatformModel, s.c.Attempts)
	}
	if _, ok := s.c.Snapshot.PlatformModel("up2/m"); !ok {
		t.Errorf("the moved request routes in a catalog without up2/m")
	}
}

// TestNewCatalogLeavesOtherModelsWaiters: a reload that changes model m's
// platform models moves m's waiter and leaves that of model n, whose
// platform models it did not change, where it waits.
func TestNewCatalogLeavesOtherModelsWaiters(t *testing.T) {
	t.Parallel()
	withN := func(c *weir.Catalog) {
		c.PlatformModels = append(c.PlatformModels, weir.PlatformModel{Name: "up/n", Platform: "up", Upstream: "gpt-4o-mini"})
		c.Models = append(c.Models, weir.Model{Name: "n", Kind: weir.KindChat, Candidates: []weir.Candidate{{PlatformModel: "up/n"}}})
		oneSlotEach(c)
	}
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) { onlyUp(c); withN(c) }})
	b.holdOne(t, "up/m")
	b.holdOne(t, "up/n")
	moved := b.serveWaiting(t, "req_m", "m")
	stays := b.serveWaiting(t, "req_n", "n")
	before, err := b.engine.Position(t.Context(), "req_n/0")
	if err != nil {
		t.Fatal(err)
	}
	cat := b.catalog()
	withN(&cat)
	if err := b.svc.Apply(t.Context(), cat, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.engine.Position(t.Context(), "req_m/0"); !errors.Is(err, admission.ErrNotQueued) {
		t.Fatalf("req_m/0 after the reload: %v; want it moved", err)
	}
	if s := await(t, moved); s.err != nil || s.c.Usage.PlatformModel != "up2/m" {
		t.Errorf("req_m: Serve %v, served by %q; want up2/m", s.err, s.c.Usage.PlatformModel)
	}
	after, err := b.engine.Position(t.Context(), "req_n/0")
	if err != nil || after != before {
		t.Errorf("req_n/0 after the reload: %+v, %v; want it queued as before, %+v", after, err, before)
	}
	select {
	case s := <-stays:
		t.Fatalf("req_n ended: %v", s.err)
	default:
	}
}

// TestMovedWaiterLeavesWithItsClient: a request moved by a reload that
// still waits (its new platform model is full too) leaves the queue when
// its client goes, as any waiter does: nothing of it stays queued.
func TestMovedWaiterLeavesWithItsClient(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) { onlyUp(c); oneSlotEach(c) }})
	b.holdOne(t, "up/m")
	// up2/m, which the reload adds, is full from the start.
	if err := b.engine.SetScope(t.Context(), weir.PlatformModelScope("up2/m"), admission.ScopeConfig{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	b.holdOne(t, "up2/m")
	ctx, leave := context.WithCancel(t.Context())
	c := b.chat(t)
	done := make(chan error, 1)
	go func() { done <- b.svc.Serve(ctx, c, &recordedAnswer{}) }()
	b.nextEvent(t, admission.OutcomeQueued, "req_1/0")
	cat := b.catalog()
	oneSlotEach(&cat)
	if err := b.svc.Apply(t.Context(), cat, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.engine.Position(t.Context(), "req_1/0~1"); err != nil {
		t.Fatalf("req_1/0~1: %v; want the moved waiter queued", err)
	}
	leave()
	if err := <-done; !errors.Is(err, ErrClientGone) {
		t.Fatalf("Serve: %v; want ErrClientGone", err)
	}
	for _, pm := range []string{"up/m", "up2/m"} {
		if st := b.scope(t, weir.PlatformModelScope(pm)); st.Queued != 0 {
			t.Errorf("%s: %d queued after the client left; want none", pm, st.Queued)
		}
	}
}
