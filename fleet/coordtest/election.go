package coordtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir/fleet"
)

// testFreshTerm: before any campaign the term is epoch 0, ended, and no
// replica is registered.
func testFreshTerm(t *testing.T, newBackend func(*testing.T) Backend) {
	store := newBackend(t).Store
	c := coord(t, store, "r", fleet.CoordConfig{})
	if term := current(t, c); term.Epoch != 0 || term.Left != 0 {
		t.Fatalf("fresh term = %+v; want epoch 0, ended", term)
	}
	if rs, err := c.Live(t.Context()); err != nil || len(rs) != 0 {
		t.Fatalf("fresh Live = %+v, %v; want none", rs, err)
	}
}

// testCampaignOneWinner: of ten concurrent campaigners for an expired
// term exactly one takes it, and every loser is told the winner's term.
func testCampaignOneWinner(t *testing.T, newBackend func(*testing.T) Backend) {
	store := newBackend(t).Store
	ctx := context.Background()
	const n = 10
	results := make([]Campaign, n)
	cs := make([]*fleet.Coordinator, n)
	for i := range n {
		cs[i] = coord(t, store, string(rune('a'+i)), fleet.CoordConfig{TermTTL: time.Minute})
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			r := &results[i]
			r.Term, r.Won, r.Err = cs[i].Campaign(ctx)
		})
	}
	close(start)
	wg.Wait()
	OneWinner(t, results)
}

// testDeposedLeaderIsRefused: once another replica took the expired
// term, the old leader's Renew and Forget change nothing, while the new
// leader's Forget works.
func testDeposedLeaderIsRefused(t *testing.T, newBackend func(*testing.T) Backend) {
	store := newBackend(t).Store
	ctx := context.Background()
	cfg := fleet.CoordConfig{TermTTL: 200 * time.Millisecond, HeartbeatTimeout: 100 * time.Millisecond}
	a, bb, gone := coord(t, store, "a", cfg), coord(t, store, "b", cfg), coord(t, store, "gone", cfg)
	gen, err := gone.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	term, won, err := a.Campaign(ctx)
	if err != nil || !won {
		t.Fatalf("a's campaign = %+v, %v, %v", term, won, err)
	}
	waitFor(t, "gone lapses", func() bool {
		rs, err := a.Lapsed(ctx)
		return err == nil && slices.Contains(ids(rs), "gone")
	})
	// b takes over once a's term has expired on the store's clock.
	var next fleet.Term
	waitFor(t, "b takes the expired term", func() bool {
		var won bool
		next, won, err = bb.Campaign(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return won
	})
	if next.Epoch != term.Epoch+1 || next.Leader != "b" {
		t.Fatalf("b took %+v, want epoch %d led by b", next, term.Epoch+1)
	}
	if ok, err := a.Renew(ctx, term.Epoch); err != nil || ok {
		t.Fatalf("deposed a's Renew = %v, %v; want refused", ok, err)
	}
	if ok, err := a.Forget(ctx, term.Epoch, "gone", gen); err != nil || ok {
		t.Fatalf("deposed a's Forget = %v, %v; want refused", ok, err)
	}
	// a cannot pass off b's epoch as its own either.
	if ok, err := a.Forget(ctx, next.Epoch, "gone", gen); err != nil || ok {
		t.Fatalf("a's Forget under b's epoch = %v, %v; want refused", ok, err)
	}
	if rs, _ := bb.Lapsed(ctx); !slices.Contains(ids(rs), "gone") {
		t.Fatal("a refused Forget removed the row")
	}
	if ok, err := bb.Forget(ctx, next.Epoch, "gone", gen+1); err != nil || ok {
		t.Fatalf("Forget of another generation = %v, %v; want refused", ok, err)
	}
	if ok, err := bb.Forget(ctx, next.Epoch, "gone", gen); err != nil || !ok {
		t.Fatalf("the leader's Forget = %v, %v; want done", ok, err)
	}
	if err := gone.Heartbeat(ctx); !errors.Is(err, fleet.ErrFenced) {
		t.Fatalf("a forgotten replica's Heartbeat = %v, want ErrFenced", err)
	}
	if ok, err := bb.Renew(ctx, next.Epoch); err != nil || !ok {
		t.Fatalf("the leader's Renew = %v, %v; want done", ok, err)
	}
}

// testForgetRefusesLiveReplica: a replica that heartbeated within the
// timeout is not forgotten, even by the current leader.
func testForgetRefusesLiveReplica(t *testing.T, newBackend func(*testing.T) Backend) {
	store := newBackend(t).Store
	ctx := context.Background()
	leader := coord(t, store, "l", fleet.CoordConfig{TermTTL: time.Minute, HeartbeatTimeout: time.Minute})
	r := coord(t, store, "r", fleet.CoordConfig{})
	gen, err := r.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	term, won, err := leader.Campaign(ctx)
	if err != nil || !won {
		t.Fatalf("campaign: %v %v", won, err)
	}
	if ok, err := leader.Forget(ctx, term.Epoch, "r", gen); err != nil || ok {
		t.Fatalf("Forget of a live replica = %v, %v; want refused", ok, err)
	}
	if err := r.Heartbeat(ctx); err != nil {
		t.Fatalf("Heartbeat after a refused Forget: %v", err)
	}
}

// testRegisterSupersedes: a restarted replica (same id) gets a newer
// generation, and the old generation's heartbeat is fenced; forgetting
// and registering again never hands back an old generation.
func testRegisterSupersedes(t *testing.T, newBackend func(*testing.T) Backend) {
	store := newBackend(t).Store
	ctx := context.Background()
	cfg := fleet.CoordConfig{TermTTL: time.Minute, HeartbeatTimeout: 50 * time.Millisecond}
	old, restarted := coord(t, store, "a", cfg), coord(t, store, "a", cfg)
	g1, err := old.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	g2, err := restarted.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g2 != g1+1 {
		t.Fatalf("second Register gave gen %d after %d, want %d", g2, g1, g1+1)
	}
	if err := old.Heartbeat(ctx); !errors.Is(err, fleet.ErrFenced) {
		t.Fatalf("the old generation's Heartbeat = %v, want ErrFenced", err)
	}
	if err := restarted.Heartbeat(ctx); err != nil {
		t.Fatalf("the new generation's Heartbeat: %v", err)
	}

	// Forget the new generation, then register again: still newer.
	leader := coord(t, store, "l", cfg)
	term, _, err := leader.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a lapses and is forgotten", func() bool {
		ok, err := leader.Forget(ctx, term.Epoch, "a", g2)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	})
	g3, err := old.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g3 <= g2 {
		t.Fatalf("Register after Forget gave gen %d, not newer than %d", g3, g2)
	}
	if err := restarted.Heartbeat(ctx); !errors.Is(err, fleet.ErrFenced) {
		t.Fatalf("the forgotten generation's Heartbeat = %v, want ErrFenced", err)
	}
}

// testLiveAndLapsed: a replica that keeps heartbeating is live; one that
// stops lapses after HeartbeatTimeout on the store's clock.
func testLiveAndLapsed(t *testing.T, newBackend func(*testing.T) Backend) {
	store := newBackend(t).Store
	ctx := context.Background()
	cfg := fleet.CoordConfig{HeartbeatTimeout: 300 * time.Millisecond}
	alive, quiet := coord(t, store, "alive", cfg), coord(t, store, "quiet", cfg)
	for _, c := range []*fleet.Coordinator{alive, quiet} {
		if _, err := c.Register(ctx); err != nil {
			t.Fatal(err)
		}
	}
	live, err := alive.Live(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(live); !slices.Equal(got, []string{"alive", "quiet"}) {
		t.Fatalf("Live = %v, want both", got)
	}
	if live[0].Addr != "alive.fleet:7000" || live[0].Gen == 0 || live[0].HeartbeatAge < 0 || live[0].HeartbeatAge >= cfg.HeartbeatTimeout {
		t.Fatalf("Live[0] = %+v", live[0])
	}
	waitFor(t, "quiet lapses", func() bool {
		if err := alive.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
		rs, err := alive.Lapsed(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Equal(ids(rs), []string{"quiet"})
	})
	lapsed, _ := alive.Lapsed(ctx)
	if lapsed[0].HeartbeatAge < cfg.HeartbeatTimeout {
		t.Fatalf("lapsed heartbeat age %v, below the timeout %v", lapsed[0].HeartbeatAge, cfg.HeartbeatTimeout)
	}
	live, err = alive.Live(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(live); !slices.Equal(got, []string{"alive"}) {
		t.Fatalf("Live = %v, want only alive", got)
	}
}

// announcements listens to store's term announcements until the test
// ends; the first one, the call that begins every listening, is 0.
func announcements(t *testing.T, store Store) <-chan uint64 {
	t.Helper()
	ch := make(chan uint64, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- store.TermListen(ctx, func(epoch uint64) {
			select {
			case ch <- epoch:
			default:
				t.Errorf("announcement of epoch %d dropped: the test reads too slowly", epoch)
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("TermListen: %v", err)
			}
		case <-time.After(guard):
			t.Error("TermListen did not return when its context ended")
		}
	})
	if e := nextAnnouncement(t, ch); e != 0 {
		t.Fatalf("first call of TermListen's f: epoch %d; want 0 (read the term in full)", e)
	}
	return ch
}

func nextAnnouncement(t *testing.T, ch <-chan uint64) uint64 {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(guard):
		t.Fatal("no announcement")
		return 0
	}
}

// testTermChangesAreNotified: a won campaign and a resignation each
// announce the epoch; a renewal and a lost campaign do not; and Resign
// ends the term at once.
func testTermChangesAreNotified(t *testing.T, newBackend func(*testing.T) Backend) {
	store := newBackend(t).Store
	ctx := context.Background()
	ch := announcements(t, store)
	a := coord(t, store, "a", fleet.CoordConfig{TermTTL: time.Minute})
	term, won, err := a.Campaign(ctx)
	if err != nil || !won {
		t.Fatalf("campaign: %v %v", won, err)
	}
	if e := nextAnnouncement(t, ch); e != 1 {
		t.Fatalf("campaign announced epoch %d, want 1", e)
	}
	if ok, err := a.Renew(ctx, term.Epoch); err != nil || !ok {
		t.Fatalf("renew: %v %v", ok, err)
	}
	if _, won, err := a.Campaign(ctx); err != nil || won {
		t.Fatalf("campaign for a running term: won %v, %v", won, err)
	}
	if err := a.Resign(ctx, term.Epoch); err != nil {
		t.Fatal(err)
	}
	// The renewal and the lost campaign sent nothing: the next
	// announcement is the resignation's.
	if e := nextAnnouncement(t, ch); e != 1 {
		t.Fatalf("resign announced epoch %d, want 1", e)
	}
	if got := current(t, a); got.Epoch != 1 || got.Left != 0 {
		t.Fatalf("after Resign the term is %+v, want epoch 1 ended", got)
	}
	if ok, err := a.Renew(ctx, term.Epoch); err != nil || ok {
		t.Fatalf("Renew of a resigned term = %v, %v; want refused", ok, err)
	}
	bb := coord(t, store, "b", fleet.CoordConfig{TermTTL: time.Minute})
	next, won, err := bb.Campaign(ctx)
	if err != nil || !won || next.Epoch != 2 {
		t.Fatalf("campaign after resign = %+v, %v, %v; want epoch 2 won", next, won, err)
	}
	if e := nextAnnouncement(t, ch); e != 2 {
		t.Fatalf("second campaign announced epoch %d, want 2", e)
	}
}

// testRegisterPublishesWorkers: each replica's worker count is read back
// with its registration, for the leader to sum.
func testRegisterPublishesWorkers(t *testing.T, newBackend func(*testing.T) Backend) {
	store := newBackend(t).Store
	ctx := context.Background()
	for id, n := range map[string]int{"a": 3, "b": 5} {
		if _, err := coord(t, store, id, fleet.CoordConfig{Workers: n}).Register(ctx); err != nil {
			t.Fatal(err)
		}
	}
	live, err := coord(t, store, "a", fleet.CoordConfig{}).Live(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != 2 || live[0].Workers != 3 || live[1].Workers != 5 {
		t.Fatalf("Live = %+v; want a with 3 workers, b with 5", live)
	}
}

// testSecretIsMadeOnce: replicas asking for the fleet's secret at once
// all get the one the first of them made, and it stays.
func testSecretIsMadeOnce(t *testing.T, newBackend func(*testing.T) Backend) {
	store := newBackend(t).Store
	const n = 8
	got := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		c := coord(t, store, fmt.Sprintf("r%d", i), fleet.CoordConfig{})
		wg.Go(func() { got[i], errs[i] = c.Secret(context.Background()) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || got[i] != got[0] || len(got[i]) < 32 {
			t.Fatalf("Secret #%d = %q, %v; want %q from every replica", i, got[i], errs[i], got[0])
		}
	}
	again, err := coord(t, store, "later", fleet.CoordConfig{}).Secret(context.Background())
	if err != nil || again != got[0] {
		t.Fatalf("a later Secret = %q, %v; want %q", again, err, got[0])
	}
}

// testRestartedReplicaTakesItsTerm: a replica id registered anew (its
// process restarted) takes the term its earlier registration still
// holds at once, under a new epoch that refuses the old one's writes;
// another replica, and the same registration, must wait for the expiry.
func testRestartedReplicaTakesItsTerm(t *testing.T, newBackend func(*testing.T) Backend) {
	store := newBackend(t).Store
	ctx := context.Background()
	cfg := fleet.CoordConfig{TermTTL: time.Hour}
	old := coord(t, store, "r0", cfg)
	if _, err := old.Register(ctx); err != nil {
		t.Fatal(err)
	}
	term, won, err := old.Campaign(ctx)
	if err != nil || !won {
		t.Fatalf("the first campaign = %+v, %v, %v", term, won, err)
	}
	other := coord(t, store, "r1", cfg)
	if _, err := other.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if _, won, err := other.Campaign(ctx); err != nil || won {
		t.Fatalf("another replica's campaign under a running term = %v, %v; want lost", won, err)
	}
	if _, won, err := old.Campaign(ctx); err != nil || won {
		t.Fatalf("the holder's own second campaign = %v, %v; want lost (its term runs)", won, err)
	}
	restarted := coord(t, store, "r0", cfg)
	if _, err := restarted.Register(ctx); err != nil {
		t.Fatal(err)
	}
	next, won, err := restarted.Campaign(ctx)
	if err != nil || !won || next.Epoch != term.Epoch+1 {
		t.Fatalf("the restarted replica's campaign = %+v, %v, %v; want epoch %d at once", next, won, err, term.Epoch+1)
	}
	if ok, err := old.Renew(ctx, term.Epoch); err != nil || ok {
		t.Fatalf("the earlier registration's Renew = %v, %v; want refused", ok, err)
	}
	if _, won, err := restarted.Campaign(ctx); err != nil || won {
		t.Fatalf("the restarted replica's second campaign = %v, %v; want lost (its own term runs)", won, err)
	}
}

// testFenceHoldsOffCampaign: a write fenced under the current epoch
// keeps the next campaign waiting until it ends, even past the term's
// expiry; afterwards the old epoch's fence, and a fence of another's
// term, are refused.
func testFenceHoldsOffCampaign(t *testing.T, newBackend func(*testing.T) Backend) {
	be := newBackend(t)
	if be.Fence == nil {
		t.Skip("the backend has no fenced writes")
	}
	store := be.Store
	ctx := context.Background()
	a := coord(t, store, "a", fleet.CoordConfig{TermTTL: 200 * time.Millisecond})
	term, won, err := a.Campaign(ctx)
	if err != nil || !won {
		t.Fatalf("campaign: %v %v", won, err)
	}
	w, err := be.Fence(ctx, "a", term.Epoch)
	if err != nil {
		t.Fatal(err)
	}
	if !w.Held() {
		t.Fatal("the fence of the current term did not hold")
	}
	waitFor(t, "a's term expires", func() bool { return current(t, a).Left == 0 })

	done := make(chan Campaign, 1)
	c := coord(t, store, "b", fleet.CoordConfig{TermTTL: time.Minute})
	go func() {
		var r Campaign
		r.Term, r.Won, r.Err = c.Campaign(ctx)
		done <- r
	}()
	waitFor(t, "the campaign waits for the fenced write", func() bool {
		n, err := w.Waiting(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	select {
	case r := <-done:
		t.Fatalf("the campaign ended while a fenced write was open: %+v", r)
	default:
	}
	if err := w.End(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.Err != nil || !r.Won || r.Term.Epoch != term.Epoch+1 {
			t.Fatalf("campaign after the fenced write = %+v", r)
		}
	case <-time.After(guard):
		t.Fatal("the campaign did not finish after the fenced write ended")
	}
	for _, f := range []struct {
		leader string
		epoch  uint64
		held   bool
	}{{"a", term.Epoch, false}, {"a", term.Epoch + 1, false}, {"b", term.Epoch + 1, true}} {
		w, err := be.Fence(ctx, f.leader, f.epoch)
		if err != nil {
			t.Fatal(err)
		}
		if w.Held() != f.held {
			t.Errorf("fence of %s's epoch %d held %v; want %v", f.leader, f.epoch, w.Held(), f.held)
		}
		if err := w.End(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// Campaign is what one campaigner's Campaign (or TermCampaign) returned.
type Campaign struct {
	Term fleet.Term
	Won  bool
	Err  error
}

// OneWinner checks the campaigns of an expired term, each for replica
// x's address x.fleet:7000: none failed, exactly one won, and every one
// was told the winner's running term of epoch 1.
func OneWinner(t *testing.T, results []Campaign) {
	t.Helper()
	var winner string
	for i, r := range results {
		if r.Err != nil {
			t.Fatalf("campaigner %d: %v", i, r.Err)
		}
		if r.Won {
			if winner != "" {
				t.Fatalf("both %s and %s won", winner, r.Term.Leader)
			}
			winner = r.Term.Leader
		}
	}
	if winner == "" {
		t.Fatal("no campaigner won an expired term")
	}
	for i, r := range results {
		if r.Term.Epoch != 1 || r.Term.Leader != winner || r.Term.Addr != winner+".fleet:7000" || r.Term.Left <= 0 {
			t.Errorf("campaigner %d saw %+v; want epoch 1 led by %s, running", i, r.Term, winner)
		}
	}
}
