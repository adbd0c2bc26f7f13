package edge

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/edge/edgepb"
	"github.com/weir-gateway/weir/provider"
)

// raceRounds is how many times each race below is run.
const raceRounds = 25

// waitOrphaned waits until scope is orphaned: its node's session has
// ended and been fenced.
func (b *testBundle) waitOrphaned(t *testing.T, scope string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !b.scope(t, scope).Orphaned {
		if time.Now().After(deadline) {
			t.Fatalf("%s was not orphaned within %s", scope, within)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestTerminalRacesDisconnect: a run's terminal event and its node's
// disconnect at the same moment end the run's lease exactly once,
// whichever wins: the caller's release after the answer (or its error)
// and the fence of the gone session converge on one end. The caller sees
// the whole answer or a clean error, never a torn one.
func TestTerminalRacesDisconnect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	scope := weir.NodeScope("node_a", "p")
	for i := range raceRounds {
		s := b.open(t, "wn-a")
		s.welcome(testProvider("p", 1, "m"))
		l := b.hold(t, fmt.Sprintf("run-%d", i), scope, admission.Owner{})
		res := b.do(t.Context(), s.gen, provider.Call{Path: "/chat/completions", Body: []byte(`{"model":"rt-m"}`)})
		o := s.offer()
		rs, err := b.openRun(t, "wn-a", o.RunId, s.gen)
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, rs)
		for _, m := range []any{&edgepb.RunHead{Status: 200}, &edgepb.Chunk{Data: []byte("answer")}} {
			if err := rs.Send(up(m)); err != nil {
				t.Fatal(err)
			}
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			<-start
			_ = rs.Send(up(&edgepb.RunEnd{Kind: edgepb.RunEnd_COMPLETE}))
		})
		wg.Go(func() {
			<-start
			s.cancel()
		})
		close(start)
		wg.Wait()
		r := <-res
		if r.err == nil && r.body != "answer" {
			t.Fatalf("round %d: a torn answer %q with no error", i, r.body)
		}
		// The gateway's release once the answer (or its error) is in.
		if err := b.engine.Release(t.Context(), l.ID, admission.Owner{}); err != nil {
			t.Errorf("round %d: the caller's release: %v", i, err)
		}
		b.waitOrphaned(t, scope)
		if n := b.ends.of(l.ID); n != 1 {
			t.Fatalf("round %d: the run's lease ended %d times; want once", i, n)
		}
		if st := b.scope(t, scope); st.Used != 0 || st.Leases != 0 {
			t.Fatalf("round %d: the gone node's scope holds %+v", i, st)
		}
	}
}

// TestReleaseRacesReconnect: a lease of one generation released while
// its node reconnects ends once, and never touches what the new
// generation holds: the slot it frees is the new generation's to give,
// once.
func TestReleaseRacesReconnect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	scope := weir.NodeScope("node_a", "p")
	old := b.open(t, "wn-a")
	old.welcome(testProvider("p", 1, "m"))
	for i := range raceRounds {
		l1 := b.hold(t, fmt.Sprintf("old-%d", i), scope, admission.Owner{})
		s := b.open(t, "wn-a")
		start := make(chan struct{})
		var wg sync.WaitGroup
		var relErr, regErr error
		var welcome *edgepb.Welcome
		wg.Go(func() {
			<-start
			relErr = b.engine.Release(t.Context(), l1.ID, admission.Owner{})
		})
		wg.Go(func() {
			<-start
			m, err := s.register(testProvider("p", 1, "m"))
			welcome, regErr = m.GetWelcome(), err
		})
		close(start)
		wg.Wait()
		if regErr != nil || welcome == nil {
			t.Fatalf("round %d: the reconnect's register: %v", i, regErr)
		}
		s.gen = welcome.Generation
		if relErr != nil {
			t.Errorf("round %d: the old generation's release: %v", i, relErr)
		}
		if n := b.ends.of(l1.ID); n != 1 {
			t.Fatalf("round %d: the old lease ended %d times; want once", i, n)
		}
		// The new generation's one slot admits one request, and a late
		// second release of the old lease does not free it.
		l2 := b.hold(t, fmt.Sprintf("new-%d", i), scope, admission.Owner{})
		if err := b.engine.Release(t.Context(), l1.ID, admission.Owner{}); err != nil {
			t.Errorf("round %d: the old lease released again: %v", i, err)
		}
		st := b.scope(t, scope)
		if st.Orphaned || st.Used != 1 || st.Config.OwnerGen != s.gen {
			t.Fatalf("round %d: scope after the reconnect %+v (orphaned %v); want generation %d's, one held", i, st.Config, st.Orphaned, s.gen)
		}
		if n := b.ends.of(l2.ID); n != 0 {
			t.Fatalf("round %d: the new generation's lease ended %d times", i, n)
		}
		if err := b.engine.Release(t.Context(), l2.ID, admission.Owner{}); err != nil {
			t.Fatal(err)
		}
		old.cancel()
		old = s
	}
}

// TestReadyEndRacesDisconnect: a run's whole answer on a ready stream
// (which puts the stream back) and its node's disconnect at the same
// moment: the caller gets the whole answer or a clean retryable error,
// never a hang or a torn answer, and no stream of the gone session is
// left waiting for a run.
func TestReadyEndRacesDisconnect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range raceRounds {
		s := b.open(t, "wn-a")
		s.welcome(testProvider("p", 2, "m"))
		rs := b.openReady(t, "wn-a", s.gen)
		b.waitReady(t, "gpu-a", 1)
		b.hub.mu.Lock()
		sess := b.hub.nodes["node_a"].sess
		b.hub.mu.Unlock()
		res := b.do(t.Context(), s.gen, provider.Call{Path: "/chat/completions", Body: []byte(`{}`)})
		readyOffer(t, rs)
		readBody(t, rs)
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			<-start
			_ = rs.Send(up(&edgepb.RunHead{Status: 200, Body: []byte("answer"), Complete: true}))
		})
		wg.Go(func() {
			<-start
			s.cancel()
		})
		close(start)
		wg.Wait()
		select {
		case r := <-res:
			var pe *provider.Error
			if r.err == nil && r.body != "answer" || r.err != nil && (!errors.As(r.err, &pe) || !pe.Retryable()) {
				t.Fatalf("the run: %q, %v; want the whole answer or a retryable error", r.body, r.err)
			}
		case <-time.After(within):
			t.Fatal("the run did not end")
		}
		deadline := time.Now().Add(within)
		for {
			sess.mu.Lock()
			left, all := len(sess.ready), sess.readyAll
			sess.mu.Unlock()
			if left == 0 && all == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the gone session keeps %d ready streams (%d counted)", left, all)
			}
			time.Sleep(time.Millisecond)
		}
	}
}
