package fleet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
)

// The leader's bound on the calls of one session it runs at once
// (leader.answer), and how a replica takes a call refused for it.

// rawSession opens a session with the leader of epoch at addr as
// replica id, with no engine behind it: the test sends its frames and
// reads the leader's.
func rawSession(t *testing.T, addr, secret, id string, epoch uint64) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc := dialFrom(t, addr, "")
	sendFrame(t, nc, &frame{Op: opHello, Epoch: epoch, Replica: id, Gen: 1, Secret: secret})
	br := bufio.NewReader(nc)
	if w := readFrame(t, nc, br); w.Op != opWelcome || w.Err != nil {
		t.Fatalf("the leader did not welcome %s: %+v", id, w)
	}
	return nc, br
}

// nextFrame reads the next frame of op from a raw session, skipping
// pings and mirrors.
func nextFrame(t *testing.T, nc net.Conn, br *bufio.Reader, op string) *frame {
	t.Helper()
	for {
		f := readFrame(t, nc, br)
		if f.Op == op {
			return f
		}
		if f.Op != opPing && f.Op != opMirror {
			t.Fatalf("a %s frame, want %s: %+v", f.Op, op, f)
		}
	}
}

// isBusy reports whether err is the leader's errBusy, as it crosses the
// wire.
func isBusy(err error) bool {
	return errors.Is(err, errWrongTerm) && strings.Contains(err.Error(), "too many calls running")
}

// runningCalls counts the goroutines running a session's call at the
// leader.
func runningCalls() int {
	n := 0
	for _, g := range fleetGoroutines() {
		if strings.Contains(g, "fleet.(*leader).answer.func") {
			n++
		}
	}
	return n
}

func needS(id string) *wireRequest {
	return &wireRequest{ID: id, Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: "s", Amount: 1}}}}}
}

// TestSessionCallsBounded: a session that floods the leader with calls
// that wait (here for a replica that never syncs) has at most the bound
// of them running; the others are refused at once, busy, and the
// session stays usable: once the wait ends, the calls that ran are
// answered, and later calls run. Not parallel: it counts the package's
// goroutines.
func TestSessionCallsBounded(t *testing.T) {
	const bound, flood = 8, 200
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	e := New(Config{Replica: "a", Gen: 1, Secret: testSecret, SessionTimeout: time.Minute,
		Options: admission.Options{Clock: clk}, sessionCalls: bound})
	ln := serveEngine(t, e)
	// The term's leader admits nothing until ghost syncs, or its clock
	// passes the session timeout.
	e.SetTerm(Term{Epoch: 1, Leader: "a", Addr: ln.Addr().String()}, true, []string{"a", "ghost"})

	nc, br := rawSession(t, ln.Addr().String(), testSecret, "x", 1)
	for i := range flood {
		sendFrame(t, nc, &frame{ID: uint64(i + 1), Op: opEnqueue, Epoch: 1, Req: needS(fmt.Sprint("w", i))})
	}
	refused := make(map[uint64]bool)
	for len(refused) < flood-bound {
		r := nextFrame(t, nc, br, opReply)
		if err := r.Err.err(); !isBusy(err) || refused[r.ID] {
			t.Fatalf("reply %d before the leader is ready: %v; want each call beyond %d refused busy, once", r.ID, err, bound)
		}
		refused[r.ID] = true
	}
	if n := runningCalls(); n != bound {
		t.Fatalf("%d of the session's calls run at the leader, want the bound, %d", n, bound)
	}

	clk.Advance(time.Minute) // the leader stops waiting for ghost
	for range bound {
		r := nextFrame(t, nc, br, opReply)
		if refused[r.ID] || isBusy(r.Err.err()) {
			t.Fatalf("reply %d once the leader is ready: %v; want one of the calls that ran", r.ID, r.Err.err())
		}
		// No scope s: the engine refused the waiter, as it would have
		// without the bound.
		if !errors.Is(r.Err.err(), admission.ErrUnknownScope) {
			t.Fatalf("reply %d: %v, want the engine's answer (unknown scope)", r.ID, r.Err.err())
		}
	}
	waitUntil(t, "the session's calls returned", func() bool { return runningCalls() == 0 })
	for i := range 2 * bound {
		sendFrame(t, nc, &frame{ID: uint64(flood + i + 1), Op: opScopes, Epoch: 1})
		if r := nextFrame(t, nc, br, opReply); r.Err != nil {
			t.Fatalf("a call after the flood: %v", r.Err.err())
		}
	}
}

// TestBusyCallAskedAgain: a replica whose call the leader refuses busy
// drops the session and asks again on the next, and a release it posted
// without waiting (lazy) that was refused is settled by the sync that
// follows: the lease goes back.
func TestBusyCallAskedAgain(t *testing.T) {
	t.Parallel()
	var dials atomic.Int32
	ns := startNodesWith(t, time.Minute, func(c *Config) {
		switch c.Replica {
		case "a":
			c.sessionCalls = 1
		case "b":
			c.LazyRelease = true
			dial := c.Dial
			c.Dial = func(ctx context.Context, addr string) (net.Conn, error) {
				dials.Add(1)
				return dial(ctx, addr)
			}
		}
	}, "a", "b")
	a, b := ns["a"], ns["b"]
	elect(1, a, []string{"a", "b"}, a, b)
	ready(t, a, b)
	for _, s := range []string{"s", "s2", "t", "u"} {
		if err := a.e.SetScope(t.Context(), s, admission.ScopeConfig{Limit: 1}); err != nil {
			t.Fatal(err)
		}
	}
	x, xr := rawSession(t, a.addr, "s", "x", 1)

	// occupy fills b's session's one slot at the leader: a release of
	// b's that admits a waiter of x, which x never acknowledges, so the
	// release waits.
	occupy := func(scope, id string) {
		t.Helper()
		l := tryAcquire(t, b.e, id+"-held", scope)
		sendFrame(t, x, &frame{ID: 1, Op: opEnqueue, Epoch: 1, Req: &wireRequest{ID: id,
			Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: scope, Amount: 1}}}}}})
		if r := nextFrame(t, x, xr, opReply); r.Err != nil {
			t.Fatalf("x's enqueue: %v", r.Err.err())
		}
		if err := b.e.Release(t.Context(), l.ID, l.Owner); err != nil {
			t.Fatal(err)
		}
		if f := nextFrame(t, x, xr, opNotify); f.Waiter != id || f.Lease == nil {
			t.Fatalf("x told %+v, want %s admitted", f, id)
		}
	}

	occupy("s", "x1")
	before := dials.Load()
	if _, err := b.e.TryAcquire(t.Context(), admission.Request{ID: "u1",
		Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: "u", Amount: 1}}}}}); err != nil {
		t.Fatalf("a call refused busy, asked again: %v", err)
	}
	if dials.Load() == before {
		t.Fatal("b's call succeeded on the session whose one slot was taken")
	}

	lease := tryAcquire(t, b.e, "t1", "t")
	occupy("s2", "x2")
	if err := b.e.Release(t.Context(), lease.ID, lease.Owner); err != nil { // posted, refused busy
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	if _, err := a.e.Acquire(ctx, admission.Request{ID: "t2",
		Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: "t", Amount: 1}}}}}); err != nil {
		t.Fatalf("t after b's refused lazy release: %v; want it released by b's next sync", err)
	}
}

// TestTermChangeWithThousandsOfCalls: a replica with thousands of
// queued waiters and thousands of calls waiting for the route through a
// change of leader gets every one of them through: with the default
// bound none is refused; with a small one, the refused are asked again
// until each has run.
func TestTermChangeWithThousandsOfCalls(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		bound int
		n     int
	}{
		{"default bound", 0, 2000},
		{"small bound", 16, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := startNodesWith(t, guard, func(c *Config) { c.sessionCalls = tc.bound }, "a", "b", "c")
			a, b, c := ns["a"], ns["b"], ns["c"]
			elect(1, a, []string{"a", "b", "c"}, a, b, c)
			ready(t, a, b, c)
			for _, n := range []*node{a, b, c} {
				for name, cfg := range map[string]admission.ScopeConfig{"s": {Limit: 1}, "free": {Limit: int64(tc.n)}} {
					if err := n.e.SetScope(t.Context(), name, cfg); err != nil {
						t.Fatal(err)
					}
				}
			}
			hold := tryAcquire(t, c.e, "hold", "s")
			ctx, cancel := context.WithTimeout(t.Context(), 4*guard)
			defer cancel()
			errs := make(chan error, 2*tc.n)
			var wg sync.WaitGroup
			for i := range tc.n {
				wg.Go(func() {
					l, err := b.e.Acquire(ctx, admission.Request{ID: fmt.Sprint("q", i),
						Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: "s", Amount: 1}}}}})
					if err == nil {
						err = b.e.Release(ctx, l.ID, l.Owner)
					}
					if err != nil {
						errs <- fmt.Errorf("waiter q%d: %w", i, err)
					}
				})
			}
			waitUntil(t, "every waiter queued", func() bool {
				st, err := a.e.Scope(ctx, "s")
				return err == nil && st.Queued == tc.n
			})

			elect(2, c, []string{"a", "b", "c"}, a, b, c)
			for i := range tc.n {
				wg.Go(func() {
					l, err := b.e.TryAcquire(ctx, admission.Request{ID: fmt.Sprint("f", i),
						Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: "free", Amount: 1}}}}})
					if err == nil {
						err = b.e.Release(ctx, l.ID, l.Owner)
					}
					if err != nil {
						errs <- fmt.Errorf("call f%d: %w", i, err)
					}
				})
			}
			ready(t, a, b, c)
			if err := c.e.Release(ctx, hold.ID, hold.Owner); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			// A release the leader could not be asked for (its session
			// closing, busy, through the change) is settled by b's next
			// sync, which need not have come yet.
			for _, s := range []string{"s", "free"} {
				waitUntil(t, "nothing held or queued in "+s+" after every call", func() bool {
					st, err := c.e.Scope(ctx, s)
					return err == nil && st.Leases == 0 && st.Queued == 0
				})
			}
		})
	}
}

// TestOneCallAtATimeNeverBusy: a session that sends each call only once
// the one before was answered has at most one call running, so a bound
// of one never refuses it: the leader frees a call's slot before it
// answers.
func TestOneCallAtATimeNeverBusy(t *testing.T) {
	t.Parallel()
	const calls = 5000
	e := New(Config{Replica: "a", Gen: 1, Secret: testSecret, SessionTimeout: time.Minute, sessionCalls: 1})
	ln := serveEngine(t, e)
	e.SetTerm(Term{Epoch: 1, Leader: "a", Addr: ln.Addr().String()}, true, []string{"a"})

	nc, br := rawSession(t, ln.Addr().String(), testSecret, "x", 1)
	for i := range calls {
		sendFrame(t, nc, &frame{ID: uint64(i + 1), Op: opScopes, Epoch: 1})
		if r := nextFrame(t, nc, br, opReply); r.ID != uint64(i+1) || r.Err != nil {
			t.Fatalf("call %d, sent once call %d was answered: reply %d, %v; want it run", i+1, i, r.ID, r.Err.err())
		}
	}
}

// serveEngine serves e's sessions on a listener of its own until the
// test ends, and returns the listener.
func serveEngine(t *testing.T, e *Engine) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serving := make(chan struct{})
	go func() {
		defer close(serving)
		_ = e.Serve(ln)
	}()
	t.Cleanup(func() {
		e.Close()
		<-serving
	})
	return ln
}
