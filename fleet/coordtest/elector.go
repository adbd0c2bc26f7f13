package coordtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/fleet"
)

// running is an Elector whose Run goes on in the background.
type running struct {
	*fleet.Elector
	id     string
	cancel context.CancelFunc
	done   chan error // Run's result
}

// elector makes an Elector for replica id on store; start runs it.
func elector(t *testing.T, store fleet.Coordination, id string, cc fleet.CoordConfig, ec fleet.ElectorConfig) *running {
	t.Helper()
	cc.Replica, cc.Addr = id, id+".fleet:7000"
	c, err := fleet.NewCoordinator(store, cc)
	if err != nil {
		t.Fatal(err)
	}
	e, err := fleet.NewElector(c, ec)
	if err != nil {
		t.Fatal(err)
	}
	return &running{Elector: e, id: id, done: make(chan error, 1)}
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
		case err := <-r.done:
			r.done <- err
		case <-time.After(guard):
			t.Errorf("Run of %s did not return after cancel", r.id)
		}
	})
}

// stop cancels Run and returns its result.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // for cleanup
		return err
	case <-time.After(guard):
		t.Fatalf("Run of %s did not return after cancel", r.id)
		return nil
	}
}

// waitTerm reads r's Changes until a term satisfies want.
func waitTerm(t *testing.T, r *running, what string, want func(fleet.Term) bool) fleet.Term {
	t.Helper()
	timeout := time.After(guard)
	for {
		select {
		case term, ok := <-r.Changes():
			if !ok {
				err := <-r.done
				r.done <- err
				t.Fatalf("%s: %s's Changes closed (Run: %v)", what, r.id, err)
			}
			if want(term) {
				return term
			}
		case <-timeout:
			t.Fatalf("%s: not reported to %s within %v", what, r.id, guard)
		}
	}
}

// watch returns a channel closed once r reports a term that satisfies
// want, for a test that must do something else (move a clock) meanwhile.
func watch(r *running, want func(fleet.Term) bool) <-chan struct{} {
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

func ledBy(id string, epoch uint64) func(fleet.Term) bool {
	return func(t fleet.Term) bool { return t.Leader == id && t.Epoch == epoch && t.Left > 0 }
}

// listenSeen is a store whose TermListen reports each time it listens
// afresh (f(0)) on listening.
type listenSeen struct {
	fleet.Coordination
	listening chan struct{}
}

func (s listenSeen) TermListen(ctx context.Context, f func(epoch uint64)) error {
	return s.Coordination.TermListen(ctx, func(epoch uint64) {
		f(epoch)
		if epoch == 0 {
			select {
			case s.listening <- struct{}{}:
			default:
			}
		}
	})
}

// testElectorTakeoverOnCancel: of two electors one leads; when its Run is
// cancelled it resigns, and the other takes over at once — long before
// the term's TTL, through the announcement — and reports it.
func testElectorTakeoverOnCancel(t *testing.T, newBackend func(*testing.T) Backend) {
	store := newBackend(t).Store
	cc := fleet.CoordConfig{TermTTL: time.Minute, HeartbeatTimeout: time.Minute}
	ec := fleet.ElectorConfig{Poll: time.Hour}
	a := elector(t, store, "a", cc, ec)
	a.start(t)
	waitTerm(t, a, "a leads", ledBy("a", 1))
	bb := elector(t, store, "b", cc, ec)
	bb.start(t)
	waitTerm(t, bb, "b sees a lead", ledBy("a", 1))
	if epoch, ok := a.Leading(); !ok || epoch != 1 {
		t.Fatalf("a.Leading() = %d, %v; want 1, true", epoch, ok)
	}
	if _, ok := bb.Leading(); ok {
		t.Fatal("b leads too")
	}
	if err := a.stop(t); err != nil {
		t.Fatalf("a's Run after cancel: %v", err)
	}
	if _, ok := a.Leading(); ok {
		t.Fatal("a still leads after Run returned")
	}
	waitTerm(t, bb, "b takes over", ledBy("b", 2))
	if epoch, ok := bb.Leading(); !ok || epoch != 2 {
		t.Fatalf("b.Leading() = %d, %v; want 2, true", epoch, ok)
	}
}

// testElectorPausedStopsLeading: an elector whose clock stands still (a
// paused process) while its term runs out on the store's clock still
// believes it leads — nothing has run — but the moment its clock moves
// on (the process resumes), Leading reports that epoch no more, before
// any renewal; it then leads again only under a new epoch.
func testElectorPausedStopsLeading(t *testing.T, newBackend func(*testing.T) Backend) {
	store := newBackend(t).Store
	seen := listenSeen{Coordination: store, listening: make(chan struct{}, 1)}
	fake := clock.NewFake(time.Unix(1_000_000, 0))
	ttl := time.Second
	a := elector(t, seen, "a", fleet.CoordConfig{TermTTL: ttl, HeartbeatTimeout: time.Minute, Clock: fake}, fleet.ElectorConfig{Poll: time.Hour})
	reader := coord(t, store, "reader", fleet.CoordConfig{})
	a.start(t)
	waitTerm(t, a, "a leads", ledBy("a", 1))
	// The re-read that follows the first listening must come while the
	// term still runs: one after its end would find it over and campaign.
	select {
	case <-seen.listening:
	case <-time.After(guard):
		t.Fatal("a never listened")
	}
	waitFor(t, "a's term expires on the store's clock", func() bool { return current(t, reader).Left == 0 })
	if epoch, ok := a.Leading(); !ok || epoch != 1 {
		// Nothing told a: no timer ran, and an expiry announces nothing.
		t.Fatalf("paused a.Leading() = %d, %v; want still 1, true", epoch, ok)
	}
	fake.Advance(ttl)
	if epoch, ok := a.Leading(); ok && epoch == 1 {
		t.Fatal("after the pause a still reports leading epoch 1")
	}
	// On its next wake it finds its deadline passed, re-reads the term,
	// finds it ended and campaigns, under a new epoch, once its jitter has
	// passed on its clock.
	again := watch(a, ledBy("a", 2))
	if !fake.AdvanceUntil(again, 5*time.Millisecond, time.Minute, guard) {
		t.Fatal("a did not lead again under epoch 2")
	}
	if epoch, ok := a.Leading(); !ok || epoch != 2 {
		t.Fatalf("a.Leading() = %d, %v; want 2, true", epoch, ok)
	}
}

// testElectorDeposedWhilePaused: while a leader's clock stands still
// another elector takes the expired term; the paused one hears of it
// through the announcement and reports the new term.
func testElectorDeposedWhilePaused(t *testing.T, newBackend func(*testing.T) Backend) {
	store := newBackend(t).Store
	fake := clock.NewFake(time.Unix(1_000_000, 0))
	ec := fleet.ElectorConfig{Poll: time.Hour}
	a := elector(t, store, "a", fleet.CoordConfig{TermTTL: 200 * time.Millisecond, HeartbeatTimeout: time.Minute, Clock: fake}, ec)
	a.start(t)
	waitTerm(t, a, "a leads", ledBy("a", 1))
	// b's TTL is short so that its campaign jitter and its retry delay
	// after a failed call (fractions of the TTL) stay well inside the
	// guard on a loaded machine.
	bb := elector(t, store, "b", fleet.CoordConfig{TermTTL: 2 * time.Second, HeartbeatTimeout: time.Minute}, ec)
	bb.start(t)
	waitTerm(t, bb, "b takes the term a let expire", ledBy("b", 2))
	waitTerm(t, a, "paused a hears that b leads", ledBy("b", 2))
	if epoch, ok := a.Leading(); ok {
		t.Fatalf("a.Leading() = %d, true after it was deposed", epoch)
	}
}

// testElectorFenced: when a newer generation of the same replica id
// registers, the old elector's next heartbeat is fenced: Run returns
// ErrFenced, and the term it held is resigned.
func testElectorFenced(t *testing.T, newBackend func(*testing.T) Backend) {
	store := newBackend(t).Store
	ctx := context.Background()
	cc := fleet.CoordConfig{TermTTL: time.Minute, HeartbeatTimeout: 300 * time.Millisecond}
	a := elector(t, store, "a", cc, fleet.ElectorConfig{Poll: time.Hour})
	a.start(t)
	waitTerm(t, a, "a leads", ledBy("a", 1))
	restarted := coord(t, store, "a", cc)
	if _, err := restarted.Register(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-a.done:
		if !errors.Is(err, fleet.ErrFenced) {
			t.Fatalf("Run = %v, want ErrFenced", err)
		}
		a.done <- err
	case <-time.After(guard):
		t.Fatal("the superseded elector's Run did not return")
	}
	if _, ok := a.Leading(); ok {
		t.Fatal("a fenced elector still leads")
	}
	if term := current(t, restarted); term.Epoch != 1 || term.Left != 0 {
		t.Fatalf("after the fenced leader stopped the term is %+v, want epoch 1 resigned", term)
	}
	for range a.Changes() {
	}
}
