package gateway

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// TestDrainSendsToTheFallbackUntilLifted: a drained platform model gets
// nothing (its fallback serves), survives a reload, shows in Scopes, and
// serves again once the drain is lifted. A 429's pause ending meanwhile
// does not lift it.
func TestDrainSendsToTheFallbackUntilLifted(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	var upCalls atomic.Int32
	b.setExec("up", counted(&upCalls, okExec))
	b.setExec("up2", okExec)
	if err := b.svc.Drain(t.Context(), "up/m", true); err != nil {
		t.Fatal(err)
	}
	if err := b.svc.Apply(t.Context(), b.catalog(), ""); err != nil {
		t.Fatal(err)
	}
	b.svc.setPMScope("up/m") // as a 429's pause ending does
	c := b.chat(t)
	if err := b.svc.Serve(t.Context(), c, &recordedAnswer{}); err != nil || c.Usage.PlatformModel != "up2/m" {
		t.Fatalf("while drained: %v, served by %q; want up2/m", err, c.Usage.PlatformModel)
	}
	var found bool
	for _, v := range b.svc.Scopes(t.Context()) {
		if v.Name == "pm:up/m" {
			found = true
			if !v.Drained || !v.Paused {
				t.Errorf("scope view %+v; want drained and paused", v)
			}
		}
	}
	if !found {
		t.Fatal("no pm:up/m in Scopes")
	}
	if err := b.svc.Drain(t.Context(), "up/m", false); err != nil {
		t.Fatal(err)
	}
	c = b.chat(t)
	if err := b.svc.Serve(t.Context(), c, &recordedAnswer{}); err != nil || c.Usage.PlatformModel != "up/m" {
		t.Fatalf("after the drain: %v, served by %q; want up/m", err, c.Usage.PlatformModel)
	}
	if err := b.svc.Drain(t.Context(), "nope", true); !errors.Is(err, ErrNotFound) {
		t.Errorf("drain of an unknown platform model: %v", err)
	}
}

// TestSetScopeLimitLastsUntilReload: a run-time limit applies at once,
// holds across a 429 pause's re-configuration, and a reload puts the
// config's back. Negative limits and node scopes are refused.
func TestSetScopeLimitLastsUntilReload(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) { c.PlatformModels[0].Concurrency = 4 }})
	scope := weir.PlatformModelScope("up/m")
	if err := b.svc.SetScopeLimit(t.Context(), scope, 1); err != nil {
		t.Fatal(err)
	}
	b.svc.setPMScope("up/m")
	if st := b.scope(t, scope); st.Config.Limit != 1 || !st.Config.RoundRobin {
		t.Fatalf("after the run-time limit: %+v", st.Config)
	}
	for _, v := range b.svc.Scopes(t.Context()) {
		if v.Name == scope && !v.LimitSet {
			t.Errorf("scope view %+v; want limit_set", v)
		}
	}
	if err := b.svc.SetScopeLimit(t.Context(), weir.GroupScope("default"), 3); err != nil {
		t.Fatal(err)
	}
	if st := b.scope(t, weir.GroupScope("default")); st.Config.Limit != 3 {
		t.Fatalf("group limit %d; want 3", st.Config.Limit)
	}
	cat := b.catalog()
	cat.PlatformModels[0].Concurrency = 4
	if err := b.svc.Apply(t.Context(), cat, ""); err != nil {
		t.Fatal(err)
	}
	if st := b.scope(t, scope); st.Config.Limit != 4 {
		t.Fatalf("after a reload: limit %d; want the config's 4", st.Config.Limit)
	}
	for _, bad := range []struct {
		scope string
		limit int64
		want  error
	}{
		{scope, -1, ErrInvalid},
		{weir.NodeScope("n1", "p"), 2, ErrInvalid},
		{weir.PlatformModelScope("nope"), 2, ErrNotFound},
		{weir.KeyScope("key_none"), 2, ErrNotFound},
	} {
		if err := b.svc.SetScopeLimit(t.Context(), bad.scope, bad.limit); !errors.Is(err, bad.want) {
			t.Errorf("SetScopeLimit(%s, %d) = %v; want %v", bad.scope, bad.limit, err, bad.want)
		}
	}
}

// TestCancelWaiterAnswersTheClient: a queued request cancelled by an
// operator ends with an error that says so; ScopeQueue listed it first.
func TestCancelWaiterAnswersTheClient(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: onlyUp})
	b.setExec("up", okExec)
	hold := b.holdSlot(t)
	c := b.chat(t)
	done := b.serveAsync(t.Context(), c, &recordedAnswer{})
	queued := b.waitEvent(t, admission.OutcomeQueued)
	q, err := b.svc.ScopeQueue(t.Context(), weir.PlatformModelScope("up/m"), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Waiters) != 1 || q.Waiters[0].ID != queued.WaiterID || q.Held != 1 {
		t.Fatalf("queue %+v; want the one waiter %s and one lease", q, queued.WaiterID)
	}
	if err := b.svc.CancelWaiter(t.Context(), queued.WaiterID); err != nil {
		t.Fatal(err)
	}
	err = <-done
	if !errors.Is(err, ErrNoCandidate) || !strings.Contains(err.Error(), "operator") {
		t.Fatalf("the cancelled request got %v", err)
	}
	if err := b.svc.CancelWaiter(t.Context(), queued.WaiterID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("cancelling it again: %v", err)
	}
	if _, err := b.svc.ScopeQueue(t.Context(), "pm:nope", 10); !errors.Is(err, ErrNotFound) {
		t.Fatalf("queue of an unknown scope: %v", err)
	}
	_ = b.engine.Release(t.Context(), hold.ID, hold.Owner)
}
