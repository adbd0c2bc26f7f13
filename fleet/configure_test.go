package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
)

// unelected is two replicas' engines, a serving on ln, with no term
// set yet. A call that waited for a leader would wait an hour.
func unelected(t *testing.T) (a, b *Engine, ln net.Listener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	cfg := func(r string) Config {
		return Config{Replica: r, Gen: 1, Secret: "s", SessionTimeout: 5 * time.Second, Unavailable: time.Hour}
	}
	a, b = New(cfg("a")), New(cfg("b"))
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)
	go a.Serve(ln)
	return a, b, ln
}

// TestConfigureBeforeALeader: a replica configures its scopes (as serve
// applies its catalog) before any leader is known, without waiting for
// one; the leader it then syncs with has them, and the removed one is
// gone.
func TestConfigureBeforeALeader(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	a, b, ln := unelected(t)

	for _, c := range []struct {
		e    *Engine
		name string
	}{{a, "from-a"}, {b, "from-b"}, {b, "gone"}} {
		if err := c.e.SetScope(ctx, c.name, admission.ScopeConfig{Limit: 2}); err != nil {
			t.Fatalf("SetScope(%s) with no leader: %v, want it recorded at once", c.name, err)
		}
	}
	if err := b.RemoveScope(ctx, "gone"); err != nil {
		t.Fatalf("RemoveScope with no leader: %v", err)
	}
	if err := b.SetScope(ctx, "owned", admission.ScopeConfig{Limit: 1, Owner: "node", OwnerGen: 3}); err != nil {
		t.Fatalf("SetScope(owned) with no leader: %v", err)
	}
	if err := b.Fence(ctx, "node", 3); err != nil {
		t.Fatalf("Fence with no leader: %v", err)
	}

	term := Term{Epoch: 1, Leader: "a", Addr: ln.Addr().String()}
	a.SetTerm(term, true, []string{"a", "b"})
	b.SetTerm(term, false, []string{"a", "b"})
	for _, e := range []*Engine{a, b} {
		if err := e.Ready(ctx); err != nil {
			t.Fatalf("replica not synced: %v", err)
		}
	}
	for _, name := range []string{"from-a", "from-b"} {
		st, err := a.Scope(ctx, name)
		if err != nil || st.Config.Limit != 2 {
			t.Errorf("the leader's scope %s: %+v, %v; want limit 2", name, st.Config, err)
		}
	}
	if _, err := b.Scope(ctx, "gone"); err == nil {
		t.Error("a scope removed before the leader was known is at the leader")
	}
	if st, err := a.Scope(ctx, "owned"); err != nil || !st.Orphaned {
		t.Errorf("the leader's scope of an owner fenced before it was known: %+v, %v; want orphaned", st, err)
	}
}

// TestRemovedIsBounded: the scopes a replica removed, which it gives the
// next leader to remove too, are bounded however many it removes (the
// gateway retiring idle end users' scopes): past maxRemoved the oldest are
// forgotten first, past removedTTL all are, and a scope set again is no
// longer removed. End users' scopes are remembered as any other.
func TestRemovedIsBounded(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	fake := clock.NewFake(time.Unix(1_000_000, 0))
	b := New(Config{Replica: "b", Gen: 1, Secret: "s", SessionTimeout: 5 * time.Second, Unavailable: time.Hour,
		Options: admission.Options{Clock: fake}})
	t.Cleanup(b.Close)
	names := []string{"group:first"}
	for i := range maxRemoved + 10 {
		names = append(names, weir.BudgetScope(weir.EndUserBudgetID("bgt_x", fmt.Sprintf("user-%d", i))))
	}
	for _, name := range names {
		if err := b.SetScope(ctx, name, admission.ScopeConfig{Limit: 1}); err != nil {
			t.Fatal(err)
		}
		if err := b.RemoveScope(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	synced := func() ([]string, int) {
		b.mu.Lock()
		defer b.mu.Unlock()
		var st syncState
		b.configLocked(&st)
		return st.Removed, len(st.Scopes)
	}
	got, scopes := synced()
	if scopes != 0 {
		t.Errorf("%d scopes after every one was removed", scopes)
	}
	if len(got) != maxRemoved || slices.Contains(got, "group:first") || !slices.Contains(got, names[len(names)-1]) {
		t.Fatalf("%d removals remembered (the first: %v, the last: %v); want the newest %d",
			len(got), slices.Contains(got, "group:first"), slices.Contains(got, names[len(names)-1]), maxRemoved)
	}
	last := names[len(names)-1]
	if err := b.SetScope(ctx, last, admission.ScopeConfig{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	if got, _ := synced(); slices.Contains(got, last) {
		t.Errorf("%s is still removed after it was set again", last)
	}
	if err := b.RemoveScope(ctx, last); err != nil {
		t.Fatal(err)
	}
	fake.Advance(removedTTL / 2)
	if err := b.RemoveScope(ctx, "group:late"); err != nil {
		t.Fatal(err)
	}
	fake.Advance(removedTTL/2 + time.Second)
	// Only group:late was removed within removedTTL.
	if got, _ := synced(); !slices.Equal(got, []string{"group:late"}) {
		t.Errorf("%d removals after removedTTL (%v...); want group:late's alone", len(got), got[:min(len(got), 3)])
	}
	b.mu.Lock()
	n, order := b.removed.len(), len(b.removed.order)
	b.mu.Unlock()
	if n != 1 || order != 1 {
		t.Errorf("%d removals remembered in an order of %d; want 1 of each", n, order)
	}
}

// TestRemovedByAnotherReplica: a scope two replicas set, which one
// retired at the leader first, is retired at the other too when it
// removes it in its turn (ErrUnknownScope, from the leader): it gives
// it to no later leader.
func TestRemovedByAnotherReplica(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	a, b, ln := unelected(t)
	term := Term{Epoch: 1, Leader: "a", Addr: ln.Addr().String()}
	a.SetTerm(term, true, []string{"a", "b"})
	b.SetTerm(term, false, []string{"a", "b"})
	for _, e := range []*Engine{a, b} {
		if err := e.Ready(ctx); err != nil {
			t.Fatalf("replica not synced: %v", err)
		}
		if err := e.SetScope(ctx, "pm:left", admission.ScopeConfig{Limit: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.RemoveScope(ctx, "pm:left"); err != nil {
		t.Fatal(err)
	}
	if err := b.RemoveScope(ctx, "pm:left"); !errors.Is(err, admission.ErrUnknownScope) {
		t.Errorf("removing a scope the leader retired already: %v; want ErrUnknownScope", err)
	}
	b.mu.Lock()
	var st syncState
	b.configLocked(&st)
	b.mu.Unlock()
	if _, ok := st.Scopes["pm:left"]; ok || !slices.Contains(st.Removed, "pm:left") {
		t.Errorf("b gives a next leader scopes %v, removed %v; want pm:left removed, not set", st.Scopes, st.Removed)
	}
}

// TestConfigureDuringSync: a scope set while a replica's sync with a new
// leader is under way (after the leader took the sync's snapshot, before
// the route opened) still reaches that leader.
func TestConfigureDuringSync(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	a, b, ln := unelected(t)
	set := make(chan error, 1)
	b.afterSync = func() {
		set <- b.SetScope(ctx, "late", admission.ScopeConfig{Limit: 1})
	}

	term := Term{Epoch: 1, Leader: "a", Addr: ln.Addr().String()}
	a.SetTerm(term, true, []string{"a", "b"})
	b.SetTerm(term, false, []string{"a", "b"})
	if err := b.Ready(ctx); err != nil {
		t.Fatalf("replica not synced: %v", err)
	}
	if err := <-set; err != nil {
		t.Fatalf("SetScope during the sync: %v", err)
	}
	if st, err := a.Scope(ctx, "late"); err != nil || st.Config.Limit != 1 {
		t.Errorf("the leader's scope late: %+v, %v; want limit 1", st.Config, err)
	}
}
