package coordtest

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/fleet"
)

// board returns a Board for replica on store whose reads count for ttl
// (zero: the default) on a clock that does not move: what it read stays
// fresh for the test.
func board(t *testing.T, store fleet.NodeBoard, replica string, ttl time.Duration) *fleet.Board {
	t.Helper()
	bd, err := fleet.NewBoard(store, fleet.BoardConfig{Replica: replica, Interval: time.Hour, TTL: ttl,
		Clock: clock.NewFake(time.Unix(0, 0))})
	if err != nil {
		t.Fatal(err)
	}
	return bd
}

// publish writes served as bd's offer, at replica's address.
func publish(t *testing.T, bd *fleet.Board, replica string, served map[string][]weir.NodeTarget, views []weir.NodeView) {
	t.Helper()
	if err := bd.Publish(t.Context(), "http://"+replica+":8080", served, views); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, bd *fleet.Board) {
	t.Helper()
	if err := bd.Read(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// offersNone wants bd to offer nothing for model m.
func offersNone(t *testing.T, bd *fleet.Board, when string) {
	t.Helper()
	if got := bd.Serving("m"); len(got) != 0 {
		t.Fatalf("%s, Serving(m) = %+v; want nothing", when, got)
	}
}

// sameJSON reports whether two JSON documents hold the same value; a
// store may keep them in another spelling (PostgreSQL's jsonb does).
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

// testBoardOffersTheOtherReplicasNodes: a replica's published nodes are
// what the others offer and where they relay; not its own; gone once it
// leaves.
func testBoardOffersTheOtherReplicasNodes(t *testing.T, newBackend func(*testing.T) Backend) {
	store := newBackend(t).Store
	a, other := board(t, store, "a", 0), board(t, store, "b", 0)
	na := weir.NodeTarget{Node: "node_00000000000a", Gen: 5, Provider: "gpu", Runtime: "llama-3", LongPromptTokens: 4096}
	publish(t, a, "a", map[string][]weir.NodeTarget{"m": {na}}, []weir.NodeView{{ID: na.Node}})
	read(t, other)
	if got := other.Serving("m"); !slices.Equal(got, []weir.NodeTarget{na}) {
		t.Fatalf("Serving(m) = %+v, want a's provider", got)
	}
	if got := other.Serving("n"); len(got) != 0 {
		t.Fatalf("Serving(n) = %+v, want none", got)
	}
	if addr, ok := other.Where(na.Node, 5); !ok || addr != "http://a:8080" {
		t.Fatalf("Where(gen 5) = %q, %v", addr, ok)
	}
	if _, ok := other.Where(na.Node, 4); ok {
		t.Fatal("an older generation has a place")
	}
	if v := other.Nodes(); len(v) != 1 || v[0].Replica != "a" || len(v[0].Nodes) != 1 || v[0].Nodes[0].ID != na.Node || v[0].Age < 0 || v[0].Age > guard {
		t.Fatalf("Nodes() = %+v", v)
	}
	read(t, a)
	offersNone(t, a, "a offers its own nodes back to itself")
	if err := a.Leave(t.Context()); err != nil {
		t.Fatal(err)
	}
	read(t, other)
	offersNone(t, other, "after a left")
}

// testBoardDropsLapsedOffers: an offer older than the TTL by the store's
// clock (its replica stopped writing) is not read.
func testBoardDropsLapsedOffers(t *testing.T, newBackend func(*testing.T) Backend) {
	store := newBackend(t).Store
	const ttl = 200 * time.Millisecond
	a, other := board(t, store, "a", ttl), board(t, store, "b", ttl)
	publish(t, a, "a", map[string][]weir.NodeTarget{"m": {{Node: "node_00000000000a", Gen: 1, Provider: "p"}}}, nil)
	read(t, other)
	if len(other.Serving("m")) != 1 {
		t.Fatal("a fresh offer is not read")
	}
	waitFor(t, "a's offer lapses", func() bool {
		read(t, other)
		return len(other.Serving("m")) == 0
	})
	if v := other.Nodes(); len(v) != 0 {
		t.Fatalf("Nodes() of a lapsed offer = %+v", v)
	}
}

// testBoardTakesTheNewestOffer: a replica's offer replaces the one it
// had, and a row the reader cannot understand (another version's) leaves
// out that replica's nodes alone.
func testBoardTakesTheNewestOffer(t *testing.T, newBackend func(*testing.T) Backend) {
	store := newBackend(t).Store
	a, other := board(t, store, "a", 0), board(t, store, "b", 0)
	first := weir.NodeTarget{Node: "node_00000000000a", Gen: 1, Provider: "p"}
	second := weir.NodeTarget{Node: "node_00000000000b", Gen: 2, Provider: "p"}
	publish(t, a, "a", map[string][]weir.NodeTarget{"m": {first}}, nil)
	publish(t, a, "a", map[string][]weir.NodeTarget{"m": {second}}, nil)
	if err := store.BoardPublish(t.Context(), &fleet.BoardPublishParams{Replica: "x", Addr: "http://x:8080",
		Served: json.RawMessage(`["not", "a", "map"]`)}); err != nil {
		t.Fatal(err)
	}
	read(t, other)
	if got := other.Serving("m"); !slices.Equal(got, []weir.NodeTarget{second}) {
		t.Fatalf("Serving(m) = %+v, want only a's newest offer", got)
	}
	offers, err := store.BoardRead(t.Context(), &fleet.BoardReadParams{Except: "b", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(offers) != 2 || offers[0].Replica != "a" || offers[1].Replica != "x" || !sameJSON(t, offers[1].Nodes, []byte(`[]`)) {
		t.Fatalf("BoardRead = %+v; want a's and x's, by replica, x's nodes empty", offers)
	}
}
