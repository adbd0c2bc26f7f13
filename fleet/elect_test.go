package fleet

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir/clock"
)

// running is an Elector whose Run goes on in the background.
type running struct {
	*Elector
	cancel context.CancelFunc
	done   chan error // Run's result
}

// elector makes an Elector for replica id on the bundle's store; start
// runs it.
func (b *bundle) elector(t *testing.T, id string, cc CoordConfig, ec ElectorConfig) *running {
	t.Helper()
	return newRunning(t, b.store, id, cc, ec)
}

func newRunning(t *testing.T, store Coordination, id string, cc CoordConfig, ec ElectorConfig) *running {
	t.Helper()
	cc.Replica, cc.Addr = id, id+".fleet:7000"
	c, err := NewCoordinator(store, cc)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewElector(c, ec)
	if err != nil {
		t.Fatal(err)
	}
	return &running{Elector: e, done: make(chan error, 1)}
}

// start runs r until the test ends.
func (r *running) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(guard):
			t.Errorf("Run of %s did not return after cancel", r.coord.Replica())
		}
	})
}

// waitTerm reads r's Changes until a term satisfies want.
func waitTerm(t *testing.T, r *running, what string, want func(Term) bool) Term {
	t.Helper()
	timeout := time.After(guard)
	for {
		select {
		case term, ok := <-r.Changes():
			if !ok {
				err := <-r.done
				r.done <- err
				t.Fatalf("%s: %s's Changes closed (Run: %v)", what, r.coord.Replica(), err)
			}
			if want(term) {
				return term
			}
		case <-timeout:
			t.Fatalf("%s: not reported to %s within %v", what, r.coord.Replica(), guard)
		}
	}
}

// watch returns a channel closed once r reports a term that satisfies
// want, for a test that must do something else (move a clock) meanwhile.
func watch(r *running, want func(Term) bool) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		for term := range r.Changes() {
			if want(term) {
				close(done)
				return
			}
		}
	}()
	return done
}

func ledBy(id string, epoch uint64) func(Term) bool {
	return func(t Term) bool { return t.Leader == id && t.Epoch == epoch && t.Left > 0 }
}

// TestElectorRunOnce: a second Run is refused.
func TestElectorRunOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.elector(t, "a", CoordConfig{}, ElectorConfig{})
	a.start(t)
	waitTerm(t, a, "a leads", ledBy("a", 1))
	if err := a.Run(context.Background()); err == nil {
		t.Fatal("a second Run was accepted")
	}
}

// cutOff is a store that a replica cannot reach while cut is set: its
// calls of the term fail.
type cutOff struct {
	Coordination
	cut atomic.Bool
}

var errCutOff = errors.New("cut off from the store")

func (c *cutOff) TermCampaign(ctx context.Context, p *TermCampaignParams) (Term, bool, error) {
	if c.cut.Load() {
		return Term{}, false, errCutOff
	}
	return c.Coordination.TermCampaign(ctx, p)
}

func (c *cutOff) TermRenew(ctx context.Context, p *TermRenewParams) (bool, error) {
	if c.cut.Load() {
		return false, errCutOff
	}
	return c.Coordination.TermRenew(ctx, p)
}

func (c *cutOff) TermGet(ctx context.Context) (Term, error) {
	if c.cut.Load() {
		return Term{}, errCutOff
	}
	return c.Coordination.TermGet(ctx)
}

// TestElectorCutOffStepsDownBeforeTheTermEnds: with the store and both
// replicas on one fake clock, a leader that can no longer renew stops
// leading on its own clock before its term ends in the store, and the
// other replica takes the next term only after that: the two never lead
// at once.
func TestElectorCutOffStepsDownBeforeTheTermEnds(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Unix(1_000_000, 0))
	store := newMemStore(fake)
	ttl := 3 * time.Second
	cc := CoordConfig{TermTTL: ttl, HeartbeatTimeout: time.Hour, Clock: fake}
	ec := ElectorConfig{Poll: time.Hour}
	aStore := &cutOff{Coordination: store}
	a := newRunning(t, aStore, "a", cc, ec)
	a.start(t)
	waitTerm(t, a, "a leads", ledBy("a", 1))
	bb := newRunning(t, store, "b", cc, ec)
	bb.start(t)
	waitTerm(t, bb, "b sees a lead", ledBy("a", 1))

	aStore.cut.Store(true)
	taken := watch(bb, ledBy("b", 2))
	if !fake.AdvanceUntil(taken, 50*time.Millisecond, time.Minute, guard) {
		t.Fatal("b did not take the term a could not renew")
	}
	if _, ok := a.Leading(); ok {
		t.Fatal("a still leads after b took the term")
	}
	a.mu.Lock()
	aUntil := a.leadUntil
	a.mu.Unlock()
	store.mu.Lock()
	term, bSince := store.term, store.term.expires.Add(-ttl)
	store.mu.Unlock()
	if term.epoch != 2 || term.leader != "b" {
		t.Fatalf("the store's term is %+v; want epoch 2 led by b", term)
	}
	if !aUntil.IsZero() {
		t.Fatalf("a's local deadline %v still set after it stepped down", aUntil)
	}
	// a's last deadline: its last successful renewal or campaign plus
	// TTL - Margin, before b's term began.
	a.mu.Lock()
	last := a.sentAt.Add(ttl - a.cfg.Margin)
	a.mu.Unlock()
	if !last.Before(bSince) {
		t.Fatalf("a led until %v, b from %v: both led at once", last, bSince)
	}
}
