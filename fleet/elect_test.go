package fleet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weir-gateway/weir/clock"
)

// running is an Elector whose Run goes on in the background.
type running struct {
	*Elector
	cancel context.CancelFunc
	done   chan error // Run's result
}

// elector makes an Elector for replica id on a pool of its own, so that
// its backends can be told apart. start runs it.
func (b *bundle) elector(t *testing.T, id string, cc CoordConfig, ec ElectorConfig) *running {
	t.Helper()
	pool := newPool(t, b.dsn, "fleet-"+id)
	return newRunning(t, pool, id, cc, ec)
}

func newRunning(t *testing.T, pool *pgxpool.Pool, id string, cc CoordConfig, ec ElectorConfig) *running {
	t.Helper()
	cc.Replica, cc.Addr = id, id+".fleet:7000"
	c, err := NewCoordinator(pool, cc)
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

// stop cancels Run and returns its result.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // for cleanup
		return err
	case <-time.After(guard):
		t.Fatalf("Run of %s did not return after cancel", r.coord.Replica())
		return nil
	}
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

// TestElectorTakeoverOnCancel: of two electors one leads; when its Run is
// cancelled it resigns, and the other takes over at once — long before
// the term's TTL, through the NOTIFY — and reports it.
func TestElectorTakeoverOnCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cc := CoordConfig{TermTTL: time.Minute, HeartbeatTimeout: time.Minute}
	ec := ElectorConfig{Poll: time.Hour}
	a := b.elector(t, "a", cc, ec)
	a.start(t)
	waitTerm(t, a, "a leads", ledBy("a", 1))
	bb := b.elector(t, "b", cc, ec)
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

// TestElectorPausedStopsLeading: an elector whose clock stands still (a
// paused process) while its term runs out on PostgreSQL's clock still
// believes it leads — nothing has run — but the moment its clock moves on
// (the process resumes), Leading reports that epoch no more, before any
// renewal; it then leads again only under a new epoch.
func TestElectorPausedStopsLeading(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fake := clock.NewFake(time.Unix(1_000_000, 0))
	ttl := time.Second
	a := b.elector(t, "a", CoordConfig{TermTTL: ttl, HeartbeatTimeout: time.Minute, Clock: fake}, ElectorConfig{Poll: time.Hour})
	// The re-read that follows the first LISTEN must come while the term
	// still runs: one after its end would find it over and campaign.
	listening := make(chan struct{}, 1)
	a.hooks = listenHooks{listening: func(uint32) {
		select {
		case listening <- struct{}{}:
		default:
		}
	}}
	a.start(t)
	waitTerm(t, a, "a leads", ledBy("a", 1))
	select {
	case <-listening:
	case <-time.After(guard):
		t.Fatal("a never LISTENed")
	}
	waitFor(t, "a's term expires on PostgreSQL's clock", func() bool { return current(t, a.coord).Left == 0 })
	if epoch, ok := a.Leading(); !ok || epoch != 1 {
		// Nothing told a: no timer ran, and an expiry sends no NOTIFY.
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

// TestElectorDeposedWhilePaused: while a leader's clock stands still
// another elector takes the expired term; the paused one hears of it
// through the NOTIFY and reports the new term.
func TestElectorDeposedWhilePaused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fake := clock.NewFake(time.Unix(1_000_000, 0))
	ec := ElectorConfig{Poll: time.Hour}
	a := b.elector(t, "a", CoordConfig{TermTTL: 200 * time.Millisecond, HeartbeatTimeout: time.Minute, Clock: fake}, ec)
	a.start(t)
	waitTerm(t, a, "a leads", ledBy("a", 1))
	// b's TTL is short so that its campaign jitter and its retry delay
	// after a failed call (fractions of the TTL) stay well inside the
	// guard on a loaded machine.
	bb := b.elector(t, "b", CoordConfig{TermTTL: 2 * time.Second, HeartbeatTimeout: time.Minute}, ec)
	bb.start(t)
	waitTerm(t, bb, "b takes the term a let expire", ledBy("b", 2))
	waitTerm(t, a, "paused a hears that b leads", ledBy("b", 2))
	if epoch, ok := a.Leading(); ok {
		t.Fatalf("a.Leading() = %d, true after it was deposed", epoch)
	}
}

// TestElectorListenReconnect: when the LISTEN connection is killed the
// listener connects again and LISTENs again; a term change sent after
// that arrives, and one sent while it was away is found by the full
// re-read. The term's TTL and the poll are far longer than the guard, so
// only these paths can deliver in time.
func TestElectorListenReconnect(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// whileAway: resign while no LISTEN is active, before the second
		// connection attempt.
		whileAway bool
	}{
		{name: "change after reconnect"},
		{name: "change while away", whileAway: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			leader := b.coord(t, "l", CoordConfig{TermTTL: time.Hour})
			term, won, err := leader.Campaign(ctx)
			if err != nil || !won {
				t.Fatalf("campaign: %v %v", won, err)
			}
			f := newRunning(t, newPool(t, b.dsn, "fleet-f"), "f",
				CoordConfig{TermTTL: time.Minute, HeartbeatTimeout: time.Minute}, ElectorConfig{Poll: time.Hour})
			pids := make(chan uint32, 4)
			resigned := make(chan error, 1)
			f.hooks = listenHooks{
				listening: func(pid uint32) { pids <- pid },
				connecting: func(attempt int) {
					if tc.whileAway && attempt == 2 {
						resigned <- leader.Resign(ctx, term.Epoch)
					}
				},
			}
			f.start(t)
			var first uint32
			select {
			case first = <-pids:
			case <-time.After(guard):
				t.Fatal("f never LISTENed")
			}
			waitTerm(t, f, "f sees l lead", ledBy("l", 1))
			if _, err := b.pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, first); err != nil {
				t.Fatal(err)
			}
			select {
			case second := <-pids:
				if second == first {
					t.Fatalf("listening again on the killed backend %d", first)
				}
			case <-time.After(guard):
				t.Fatal("f did not LISTEN again after its connection was killed")
			}
			if tc.whileAway {
				if err := <-resigned; err != nil {
					t.Fatal(err)
				}
			} else if err := leader.Resign(ctx, term.Epoch); err != nil {
				t.Fatal(err)
			}
			waitTerm(t, f, "f takes the resigned term", ledBy("f", 2))
		})
	}
}

// TestElectorFenced: when a newer generation of the same replica id
// registers, the old elector's next heartbeat is fenced: Run returns
// ErrFenced, and the term it held is resigned.
func TestElectorFenced(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	cc := CoordConfig{TermTTL: time.Minute, HeartbeatTimeout: 300 * time.Millisecond}
	a := b.elector(t, "a", cc, ElectorConfig{Poll: time.Hour})
	a.start(t)
	waitTerm(t, a, "a leads", ledBy("a", 1))
	restarted := b.coord(t, "a", cc)
	if _, err := restarted.Register(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-a.done:
		if !errors.Is(err, ErrFenced) {
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
