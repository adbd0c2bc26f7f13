package gateway

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/storetest"
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

// replica is another gateway service of the bundle's fleet: the same
// engine (a fleet's is shared), store and clock, the same catalog
// applied, as a second `weir serve` on the same PostgreSQL would be.
func (b *testBundle) replica(t *testing.T) *Service {
	t.Helper()
	r := New(Config{}, Deps{Engine: b.engine, Keys: b.store, Overrides: b.store, Clock: b.clock, Metrics: &countingMetrics{}})
	if err := r.Apply(t.Context(), b.catalog(), ""); err != nil {
		t.Fatal(err)
	}
	return r
}

// view is what s reports of scope.
func view(t *testing.T, s *Service, scope string) ScopeView {
	t.Helper()
	for _, v := range s.Scopes(t.Context()) {
		if v.Name == scope {
			return v
		}
	}
	t.Fatalf("no scope %s", scope)
	return ScopeView{}
}

// TestDrainHoldsAcrossReplicas: a drain set through one replica holds
// through another replica's reload, every replica reports it, and it is
// lifted through any of them; a replica that has not reloaded keeps it
// when it sets the scope again itself (its own upstream pause ending).
func TestDrainHoldsAcrossReplicas(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	a, other := b.svc, b.replica(t)
	pm := weir.PlatformModelScope("up/m")
	if err := a.Drain(t.Context(), "up/m", true); err != nil {
		t.Fatal(err)
	}
	if err := other.Apply(t.Context(), b.catalog(), ""); err != nil {
		t.Fatal(err)
	}
	if !b.scope(t, pm).Config.Paused {
		t.Fatal("another replica's reload undid the drain")
	}
	for name, s := range map[string]*Service{"the replica that drained": a, "the other": other} {
		if v := view(t, s, pm); !v.Drained || !v.Paused {
			t.Errorf("%s reports %+v; want drained and paused", name, v)
		}
	}
	// The other replica's own pause of up/m begins and ends: the drain
	// stays.
	other.PauseUpstream("up/m", 3*time.Second)
	b.clock.Advance(3 * time.Second)
	if !b.scope(t, pm).Config.Paused {
		t.Fatal("a pause ending on another replica undid the drain")
	}
	if err := other.Drain(t.Context(), "up/m", false); err != nil {
		t.Fatal(err)
	}
	if b.scope(t, pm).Config.Paused {
		t.Fatal("lifted through the other replica, the drain holds")
	}
	if v := view(t, a, pm); v.Drained || v.Paused {
		t.Errorf("the replica that drained reports %+v after the other lifted it", v)
	}
}

// TestDrainPickedUpByPoll: a started replica learns of a drain set
// elsewhere within OverridePoll, without a reload or a report, and sets
// the scope from it.
func TestDrainPickedUpByPoll(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	other := New(Config{OverridePoll: time.Second}, Deps{Engine: b.engine, Keys: b.store, Overrides: b.store, Clock: b.clock})
	if err := other.Apply(t.Context(), b.catalog(), ""); err != nil {
		t.Fatal(err)
	}
	if err := other.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Stop(context.Background()) })
	if err := b.svc.Drain(t.Context(), "up/m", true); err != nil {
		t.Fatal(err)
	}
	if other.ops.drainedNow("up/m") {
		t.Fatal("the other replica knew of the drain before it read the store")
	}
	b.clock.Advance(time.Second)
	if !other.ops.drainedNow("up/m") {
		t.Fatal("the other replica did not learn of the drain within OverridePoll")
	}
	_ = other.Stop(t.Context())
	if err := b.svc.Drain(t.Context(), "up/m", false); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Second)
	if !other.ops.drainedNow("up/m") {
		t.Error("a stopped replica read the store")
	}
}

// TestScopeLimitResetFleetWide: a run-time limit set through one replica
// is reported by every replica, and any replica's reload puts the
// config's back — the platform model's, and a key's — and is reported so
// by every replica.
func TestScopeLimitResetFleetWide(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	a, other := b.svc, b.replica(t)
	pm, key := weir.PlatformModelScope("up/m"), weir.KeyScope("key_1")
	if _, err := b.store.KeyByID(t.Context(), "key_1"); err == nil {
		t.Fatal("key_1 exists already")
	}
	k := weir.APIKey{ID: "key_1", Hash: "h1", CreatedAt: b.clock.Now(), Limits: weir.Limits{Concurrency: 5}}
	if err := b.store.KeyCreate(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	if err := a.EnsureKeyScope(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	for scope, limit := range map[string]int64{pm: 1, key: 2} {
		if err := a.SetScopeLimit(t.Context(), scope, limit); err != nil {
			t.Fatal(err)
		}
		if v := view(t, other, scope); !v.LimitSet || v.Limit != limit {
			t.Errorf("the other replica reports %+v; want limit %d, set at run time", v, limit)
		}
	}
	if err := other.Apply(t.Context(), b.catalog(), ""); err != nil {
		t.Fatal(err)
	}
	for scope, limit := range map[string]int64{pm: 0, key: 5} {
		if st := b.scope(t, scope); st.Config.Limit != limit {
			t.Errorf("%s after the other replica's reload: limit %d; want the config's %d", scope, st.Config.Limit, limit)
		}
		for name, s := range map[string]*Service{"the replica that set it": a, "the other": other} {
			if v := view(t, s, scope); v.LimitSet {
				t.Errorf("%s reports %+v after a reload; want no run-time limit", name, v)
			}
		}
	}
}

// failingOverrides is a store of overrides that cannot be reached.
type failingOverrides struct{}

var errStoreDown = errors.New("store down")

func (failingOverrides) OverrideSet(context.Context, weir.Override) error { return errStoreDown }
func (failingOverrides) OverrideList(context.Context) ([]weir.Override, error) {
	return nil, errStoreDown
}
func (failingOverrides) OverrideDelete(context.Context, *weir.OverrideDeleteParams) (int, error) {
	return 0, errStoreDown
}

// TestOverridesStoreDown: with the store out of reach a drain or a limit
// is refused as unavailable and changes nothing, a reload fails before
// changing anything, and reports keep the last view.
func TestOverridesStoreDown(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	pm := weir.PlatformModelScope("up/m")
	b.svc.deps.Overrides = failingOverrides{}
	if err := b.svc.Drain(t.Context(), "up/m", true); !errors.Is(err, ErrUnavailable) {
		t.Errorf("drain: %v; want ErrUnavailable", err)
	}
	if err := b.svc.SetScopeLimit(t.Context(), pm, 1); !errors.Is(err, ErrUnavailable) {
		t.Errorf("limit: %v; want ErrUnavailable", err)
	}
	before := b.svc.Snapshot()
	cat := b.catalog()
	onlyUp(&cat)
	if err := b.svc.Apply(t.Context(), cat, ""); !errors.Is(err, ErrUnavailable) || b.svc.Snapshot() != before {
		t.Errorf("reload: %v; want ErrUnavailable and the catalog as it was", err)
	}
	if st := b.scope(t, pm); st.Config.Paused || st.Config.Limit != 0 {
		t.Errorf("scope %+v; want it untouched", st.Config)
	}
	if v := view(t, b.svc, pm); v.Drained || v.LimitSet {
		t.Errorf("reported %+v", v)
	}
	if b.metrics.count("overrides") == 0 {
		t.Error("the failed reads are not counted")
	}
}

// TestMemOverrides: a service given no store keeps its overrides as the
// stores do.
func TestMemOverrides(t *testing.T) {
	t.Parallel()
	storetest.ExerciseOverrides(t, func(t *testing.T) interface {
		weir.OverrideStore
		io.Closer
	} {
		return struct {
			weir.OverrideStore
			io.Closer
		}{&memOverrides{}, io.NopCloser(nil)}
	})
}

// TestTakeKeepsRunTimeLimits: a fleet replica taking a catalog version
// (Take) keeps the run-time limits, which only a publication forgets;
// the version's other limits apply.
func TestTakeKeepsRunTimeLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) { c.PlatformModels[0].Concurrency = 4 }})
	scope := weir.PlatformModelScope("up/m")
	if err := b.svc.SetScopeLimit(t.Context(), scope, 1); err != nil {
		t.Fatal(err)
	}
	cat := b.catalog()
	cat.PlatformModels[0].Concurrency = 6
	cat.Groups = append(cat.Groups, weir.Group{Name: "batch", Limits: weir.Limits{Concurrency: 2}})
	if err := b.svc.Take(t.Context(), cat, ""); err != nil {
		t.Fatal(err)
	}
	if st := b.scope(t, scope); st.Config.Limit != 1 {
		t.Errorf("after taking a version: limit %d; want the run-time 1 kept", st.Config.Limit)
	}
	if st := b.scope(t, weir.GroupScope("batch")); st.Config.Limit != 2 {
		t.Errorf("the version's new group: limit %d; want 2", st.Config.Limit)
	}
	if err := b.svc.Apply(t.Context(), cat, ""); err != nil {
		t.Fatal(err)
	}
	if st := b.scope(t, scope); st.Config.Limit != 6 {
		t.Errorf("after a reload: limit %d; want the config's 6", st.Config.Limit)
	}
}
