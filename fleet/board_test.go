package fleet

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/clock"
)

// boardBundle is a store on a fake clock of its own, whose boards each
// have another fake clock: the store's ages the offers, a board's what
// it read.
func boardBundle(t *testing.T) (*bundle, *clock.Fake) {
	t.Helper()
	fc := clock.NewFake(time.Unix(1_000_000, 0))
	return &bundle{store: newMemStore(fc)}, fc
}

func (b *bundle) board(t *testing.T, replica string) *Board {
	t.Helper()
	bd, err := NewBoard(b.store, BoardConfig{Replica: replica, Interval: time.Hour,
		Clock: clock.NewFake(time.Unix(0, 0))})
	if err != nil {
		t.Fatal(err)
	}
	return bd
}

// publish writes served as bd's offer, at bd's replica's address.
func publish(t *testing.T, bd *Board, served map[string][]weir.NodeTarget, views []weir.NodeView) {
	t.Helper()
	if err := bd.Publish(t.Context(), "http://"+bd.cfg.Replica+":8080", served, views); err != nil {
		t.Fatal(err)
	}
}

// offersNone wants bd to offer nothing for model m.
func offersNone(t *testing.T, bd *Board, when string) {
	t.Helper()
	if got := bd.Serving("m"); len(got) != 0 {
		t.Fatalf("%s, Serving(m) = %+v; want nothing", when, got)
	}
}

func read(t *testing.T, bd *Board) {
	t.Helper()
	if err := bd.Read(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestBoardDropsLapsedOffers: an offer older than the TTL (its replica
// stopped writing) is not read.
func TestBoardDropsLapsedOffers(t *testing.T) {
	t.Parallel()
	b, storeClock := boardBundle(t)
	a, other := b.board(t, "a"), b.board(t, "b")
	publish(t, a, map[string][]weir.NodeTarget{"m": {{Node: "node_00000000000a", Gen: 1, Provider: "p"}}}, nil)
	storeClock.Advance(other.cfg.TTL - time.Microsecond)
	read(t, other)
	if len(other.Serving("m")) != 1 {
		t.Fatal("an offer younger than the TTL is not read")
	}
	storeClock.Advance(time.Microsecond)
	read(t, other)
	offersNone(t, other, "a lapsed offer is read")
}

// TestBoardTakesAMovedNodeAtItsNewestGeneration: a node that left one
// replica for another, before the first wrote again, is offered once, at
// the replica of its newer session.
func TestBoardTakesAMovedNodeAtItsNewestGeneration(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, c, other := b.board(t, "a"), b.board(t, "c"), b.board(t, "b")
	old := weir.NodeTarget{Node: "node_00000000000a", Gen: 5, Provider: "p"}
	moved := old
	moved.Gen = 7
	for bd, nt := range map[*Board]weir.NodeTarget{a: old, c: moved} {
		publish(t, bd, map[string][]weir.NodeTarget{"m": {nt}}, nil)
	}
	read(t, other)
	if got := other.Serving("m"); !slices.Equal(got, []weir.NodeTarget{moved}) {
		t.Fatalf("Serving(m) = %+v, want only the newer session", got)
	}
	if addr, _ := other.Where(old.Node, 7); addr != "http://c:8080" {
		t.Fatalf("Where = %q, want c's", addr)
	}
	if _, ok := other.Where(old.Node, 5); ok {
		t.Fatal("the older session still has a place")
	}
}

// TestBoardRunPublishesChangesAndLeaves: a change of the replica's nodes
// is written without waiting for the interval; the offer goes when Run
// ends.
func TestBoardRunPublishesChangesAndLeaves(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, other := b.board(t, "a"), b.board(t, "b")
	var mu sync.Mutex
	var served map[string][]weir.NodeTarget
	take := func() map[string][]weir.NodeTarget {
		mu.Lock()
		defer mu.Unlock()
		return served
	}
	changes := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx, &Offer{Addr: "http://a:8080", Served: take, Changes: changes}) }()

	// Run's first round writes the offer as it is then, empty; only then
	// does the replica's node come, and only the change can write it: the
	// interval is an hour on a clock that does not move.
	until(t, "the first offer", func() bool { read(t, other); return len(other.Nodes()) == 1 })
	nt := weir.NodeTarget{Node: "node_00000000000a", Gen: 3, Provider: "p"}
	mu.Lock()
	served = map[string][]weir.NodeTarget{"m": {nt}}
	mu.Unlock()
	changes <- struct{}{}
	until(t, "the change", func() bool { read(t, other); return len(other.Serving("m")) == 1 })
	cancel()
	<-done
	read(t, other)
	offersNone(t, other, "after Run ended")
}

// until waits for cond, read from the store, for up to guard.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(guard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s was never published", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBoardForgetsWhatItCannotRenew: what the last read found counts for
// the TTL, no longer: with the store out of reach, the other replicas'
// nodes may be gone.
func TestBoardForgetsWhatItCannotRenew(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, other := b.board(t, "a"), b.board(t, "b")
	nt := weir.NodeTarget{Node: "node_00000000000a", Gen: 1, Provider: "p"}
	publish(t, a, map[string][]weir.NodeTarget{"m": {nt}}, nil)
	read(t, other)
	fc := other.cfg.Clock.(*clock.Fake)
	fc.Advance(other.cfg.TTL - time.Second)
	if len(other.Serving("m")) != 1 {
		t.Fatal("forgotten within the TTL")
	}
	fc.Advance(time.Second)
	offersNone(t, other, "after the TTL without a read")
	if _, ok := other.Where(nt.Node, nt.Gen); ok {
		t.Fatal("Where after the TTL without a read")
	}
	if got := other.Nodes(); len(got) != 0 {
		t.Fatalf("Nodes after the TTL without a read = %+v", got)
	}
}

// TestBoardSkipsAnUnreadableRow: a replica whose row this one cannot
// read (another version's) is left out; the others' nodes are offered.
func TestBoardSkipsAnUnreadableRow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, other := b.board(t, "a"), b.board(t, "b")
	if err := b.store.BoardPublish(t.Context(), &BoardPublishParams{Replica: "x", Addr: "http://x:8080",
		Served: []byte(`["not", "a", "map"]`)}); err != nil {
		t.Fatal(err)
	}
	nt := weir.NodeTarget{Node: "node_00000000000a", Gen: 1, Provider: "p"}
	publish(t, a, map[string][]weir.NodeTarget{"m": {nt}}, nil)
	read(t, other)
	if got := other.Serving("m"); !slices.Equal(got, []weir.NodeTarget{nt}) {
		t.Fatalf("Serving = %+v, want a's despite x's row", got)
	}
}

// TestBoardHolding: Holding names the replicas whose published nodes
// include the node, by id or name, gone or connected; none for a node
// nobody lists.
func TestBoardHolding(t *testing.T) {
	t.Parallel()
	b, _ := boardBundle(t)
	a, c, other := b.board(t, "a"), b.board(t, "c"), b.board(t, "b")
	publish(t, a, nil, []weir.NodeView{{ID: "node_00000000000a", Name: "gpu-a"}})
	publish(t, c, map[string][]weir.NodeTarget{"m": {{Node: "node_00000000000a", Gen: 9, Provider: "p"}}},
		[]weir.NodeView{{ID: "node_00000000000a", Name: "gpu-a", Connected: true}, {ID: "node_00000000000c", Name: "gpu-c"}})
	read(t, other)
	for node, want := range map[string][]string{
		"gpu-a":             {"http://a:8080", "http://c:8080"},
		"node_00000000000a": {"http://a:8080", "http://c:8080"},
		"gpu-c":             {"http://c:8080"},
		"gpu-z":             nil,
	} {
		got := other.Holding(node)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("Holding(%s) = %v, want %v", node, got, want)
		}
	}
}
