package storetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// nodeStore is what ExerciseNodes runs against.
type nodeStore = interface {
	weir.NodeStore
	io.Closer
}

// ExerciseNodes runs the NodeStore contract as numbered subtests, in
// parallel, each on a new, empty store from newStore, which it closes when
// the subtest ends. The contract, beyond the comments on weir.NodeStore,
// is in the package documentation.
func ExerciseNodes(t *testing.T, newStore func(t *testing.T) interface {
	weir.NodeStore
	io.Closer
}) {
	t.Helper()
	runSubtests(t, newStore, []subtest[nodeStore]{
		{"01_NodeCreateThenGetByHashAndID", testNodeCreateGet},
		{"02_NodeListByName", testNodeList},
		{"03_NodeRevoke", testNodeRevoke},
		{"04_NodeUnknownIsNotFound", testNodeNotFound},
		{"05_NodeDuplicateIsConflict", testNodeConflict},
		{"06_NodeInvalidIsRejected", testNodeInvalid},
		{"07_NodeNameRace", testNodeNameRace},
		{"08_NodeCancelledContext", testNodeCancelled},
	})
}

// newNode is a valid, active node numbered i.
func newNode(i int) weir.Node {
	return weir.Node{
		ID:        fmt.Sprintf("node_%012x", 0xa000+i),
		Name:      fmt.Sprintf("gpu-%03d", i),
		Prefix:    fmt.Sprintf("wn-Xy%05d", i),
		Hash:      fmt.Sprintf("%064x", 5000+i),
		CreatedAt: base.Add(time.Duration(i) * time.Minute),
	}
}

func mustCreateNodes(t *testing.T, s weir.NodeStore, nodes ...weir.Node) {
	t.Helper()
	for _, n := range nodes {
		if err := s.NodeCreate(t.Context(), n); err != nil {
			t.Fatalf("NodeCreate(%s %q): %v", n.ID, n.Name, err)
		}
	}
}

// checkNode compares a node read back with the one written.
func checkNode(t *testing.T, what string, got, written weir.Node) {
	t.Helper()
	want := written
	want.CreatedAt = stored(written.CreatedAt)
	want.RevokedAt = stored(written.RevokedAt)
	if got.CreatedAt.Location() != time.UTC || (!got.RevokedAt.IsZero() && got.RevokedAt.Location() != time.UTC) {
		t.Errorf("%s: times not in UTC: created %v, revoked %v", what, got.CreatedAt, got.RevokedAt)
	}
	same := got.ID == want.ID && got.Name == want.Name && got.Prefix == want.Prefix && got.Hash == want.Hash &&
		got.CreatedAt.Equal(want.CreatedAt) && got.RevokedAt.Equal(want.RevokedAt)
	if !same {
		t.Errorf("%s:\n got  %+v\n want %+v", what, got, want)
	}
}

// checkNodes compares a listing with the nodes expected, in order.
func checkNodes(t *testing.T, what string, got, want []weir.Node) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d nodes %v, want %d: %v", what, len(got), nodeNames(got), len(want), nodeNames(want))
	}
	for i := range want {
		checkNode(t, fmt.Sprintf("%s[%d]", what, i), got[i], want[i])
	}
}

func nodeNames(ns []weir.Node) []string {
	names := make([]string, len(ns))
	for i, n := range ns {
		names[i] = n.Name
	}
	return names
}

func listNodes(t *testing.T, s weir.NodeStore) []weir.Node {
	t.Helper()
	got, err := s.NodeList(t.Context())
	if err != nil {
		t.Fatalf("NodeList: %v", err)
	}
	return got
}

func testNodeCreateGet(t *testing.T, s nodeStore) {
	n := newNode(1)
	n.Name = "gpu-München 1 (rack 3)" // printable, not ASCII, spaces inside
	mustCreateNodes(t, s, n)

	got, err := s.NodeByHash(t.Context(), n.Hash)
	if err != nil {
		t.Fatalf("NodeByHash: %v", err)
	}
	checkNode(t, "NodeByHash", got, n)
	if !got.Active() {
		t.Errorf("a new node is not active: RevokedAt %v", got.RevokedAt)
	}
	got, err = s.NodeByID(t.Context(), n.ID)
	if err != nil {
		t.Fatalf("NodeByID: %v", err)
	}
	checkNode(t, "NodeByID", got, n)
}

// testNodeList: every node, revoked ones too, by name in byte order —
// upper case before lower, "-" before letters and digits — whatever the
// order of creation and whatever collation the database would use.
func testNodeList(t *testing.T, s nodeStore) {
	if got := listNodes(t, s); len(got) != 0 {
		t.Fatalf("NodeList on an empty store: %v", nodeNames(got))
	}
	names := []string{"b", "Zeta", "a-b", "ab", "alpha", "a", "ä", "A1", "a b"}
	var nodes []weir.Node
	for i, name := range names {
		n := newNode(i)
		n.Name = name
		// Creation order the reverse of name order for some, so that a
		// list by creation would show.
		n.CreatedAt = base.Add(-time.Duration(i) * time.Minute)
		nodes = append(nodes, n)
	}
	mustCreateNodes(t, s, nodes...)
	revokedAt := base.Add(time.Hour)
	if err := s.NodeRevoke(t.Context(), &weir.NodeRevokeParams{ID: nodes[2].ID, At: revokedAt}); err != nil {
		t.Fatalf("NodeRevoke: %v", err)
	}
	nodes[2].RevokedAt = revokedAt

	want := slices.Clone(nodes)
	slices.SortFunc(want, func(a, b weir.Node) int { return strings.Compare(a.Name, b.Name) })
	checkNodes(t, "NodeList", listNodes(t, s), want)
}

func testNodeRevoke(t *testing.T, s nodeStore) {
	n, other := newNode(1), newNode(2)
	mustCreateNodes(t, s, n, other)
	first := base.Add(time.Hour)
	if err := s.NodeRevoke(t.Context(), &weir.NodeRevokeParams{ID: n.ID, At: first}); err != nil {
		t.Fatalf("NodeRevoke: %v", err)
	}
	if err := s.NodeRevoke(t.Context(), &weir.NodeRevokeParams{ID: n.ID, At: first.Add(time.Hour)}); err != nil {
		t.Fatalf("NodeRevoke a second time: %v", err)
	}
	n.RevokedAt = first // the first revocation stands

	got, err := s.NodeByHash(t.Context(), n.Hash)
	if err != nil {
		t.Fatalf("NodeByHash of a revoked node: %v", err)
	}
	checkNode(t, "NodeByHash after revoke", got, n)
	if got.Active() {
		t.Errorf("a revoked node is active")
	}
	got, err = s.NodeByID(t.Context(), n.ID)
	if err != nil {
		t.Fatalf("NodeByID of a revoked node: %v", err)
	}
	checkNode(t, "NodeByID after revoke", got, n)
	checkNodes(t, "NodeList after revoke", listNodes(t, s), []weir.Node{n, other})

	if err := s.NodeRevoke(t.Context(), &weir.NodeRevokeParams{ID: newNode(3).ID, At: first}); !errors.Is(err, weir.ErrNotFound) {
		t.Errorf("NodeRevoke of an unknown node: %v, want ErrNotFound", err)
	}
	if err := s.NodeRevoke(t.Context(), &weir.NodeRevokeParams{ID: other.ID, At: time.Time{}}); !errors.Is(err, weir.ErrInvalid) {
		t.Errorf("NodeRevoke at the zero time: %v, want ErrInvalid", err)
	}
	got, err = s.NodeByID(t.Context(), other.ID)
	if err != nil {
		t.Fatalf("NodeByID: %v", err)
	}
	checkNode(t, "the other node", got, other)
}

func testNodeNotFound(t *testing.T, s nodeStore) {
	n := newNode(1)
	mustCreateNodes(t, s, n)
	for _, hash := range []string{fmt.Sprintf("%064x", 99), "", n.ID, n.Prefix} {
		if _, err := s.NodeByHash(t.Context(), hash); !errors.Is(err, weir.ErrNotFound) {
			t.Errorf("NodeByHash(%q): %v, want ErrNotFound", hash, err)
		}
	}
	for _, id := range []string{newNode(2).ID, "", n.Name, n.Hash} {
		if _, err := s.NodeByID(t.Context(), id); !errors.Is(err, weir.ErrNotFound) {
			t.Errorf("NodeByID(%q): %v, want ErrNotFound", id, err)
		}
	}
}

// testNodeConflict: a taken name (of an active or a revoked node), ID or
// hash is ErrConflict and stores nothing.
func testNodeConflict(t *testing.T, s nodeStore) {
	n, revoked := newNode(1), newNode(2)
	mustCreateNodes(t, s, n, revoked)
	if err := s.NodeRevoke(t.Context(), &weir.NodeRevokeParams{ID: revoked.ID, At: base.Add(time.Hour)}); err != nil {
		t.Fatalf("NodeRevoke: %v", err)
	}
	revoked.RevokedAt = base.Add(time.Hour)

	for i, tc := range []struct {
		what string
		edit func(*weir.Node)
	}{
		{"a taken name", func(m *weir.Node) { m.Name = n.Name }},
		{"the name of a revoked node", func(m *weir.Node) { m.Name = revoked.Name }},
		{"a taken id", func(m *weir.Node) { m.ID = n.ID }},
		{"a taken hash", func(m *weir.Node) { m.Hash = n.Hash }},
		{"the hash of a revoked node", func(m *weir.Node) { m.Hash = revoked.Hash }},
	} {
		m := newNode(10 + i)
		tc.edit(&m)
		if err := s.NodeCreate(t.Context(), m); !errors.Is(err, weir.ErrConflict) {
			t.Errorf("NodeCreate with %s: %v, want ErrConflict", tc.what, err)
		}
	}
	checkNodes(t, "NodeList after the conflicts", listNodes(t, s), []weir.Node{n, revoked})
}

// testNodeInvalid: what Validate refuses the store refuses, with
// ErrInvalid, storing nothing.
func testNodeInvalid(t *testing.T, s nodeStore) {
	for i, tc := range []struct {
		what string
		edit func(*weir.Node)
	}{
		{"no id", func(n *weir.Node) { n.ID = "" }},
		{"an id of another shape", func(n *weir.Node) { n.ID = "key_0123456789ab" }},
		{"no name", func(n *weir.Node) { n.Name = "" }},
		{"a name of 101 bytes", func(n *weir.Node) { n.Name = fmt.Sprintf("%0101d", 7) }},
		{"a name with a space at the end", func(n *weir.Node) { n.Name += " " }},
		{"a name with a newline", func(n *weir.Node) { n.Name += "\nx" }},
		{"a name with a NUL", func(n *weir.Node) { n.Name += "\x00x" }},
		{"a name not UTF-8", func(n *weir.Node) { n.Name += "\xff" }},
		{"a name shaped like an id", func(n *weir.Node) { n.Name = "node_0123456789ab" }},
		{"no prefix", func(n *weir.Node) { n.Prefix = "" }},
		{"a whole token as prefix", func(n *weir.Node) { n.Prefix = "wn-0123456789012345678901234567890123456789" }},
		{"no hash", func(n *weir.Node) { n.Hash = "" }},
		{"a hash that is not hex SHA-256", func(n *weir.Node) { n.Hash = "wn-secret" }},
		{"no creation time", func(n *weir.Node) { n.CreatedAt = time.Time{} }},
	} {
		n := newNode(i)
		tc.edit(&n)
		if err := s.NodeCreate(t.Context(), n); !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("NodeCreate with %s: %v, want ErrInvalid", tc.what, err)
		}
		if _, err := s.NodeByHash(t.Context(), n.Hash); !errors.Is(err, weir.ErrNotFound) {
			t.Errorf("NodeCreate with %s stored it: NodeByHash %v", tc.what, err)
		}
	}
	if got := listNodes(t, s); len(got) != 0 {
		t.Errorf("invalid nodes were stored: %v", nodeNames(got))
	}
}

// testNodeNameRace: of concurrent creates of one name exactly one
// succeeds; the others are ErrConflict.
func testNodeNameRace(t *testing.T, s nodeStore) {
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			node := newNode(i)
			node.Name = "same-name"
			errs[i] = s.NodeCreate(t.Context(), node)
		})
	}
	wg.Wait()
	created := 0
	for i, err := range errs {
		switch {
		case err == nil:
			created++
		case !errors.Is(err, weir.ErrConflict):
			t.Errorf("create %d: %v, want nil or ErrConflict", i, err)
		}
	}
	if got := listNodes(t, s); created != 1 || len(got) != 1 {
		t.Errorf("%d creates succeeded and %d nodes are stored; want 1 and 1", created, len(got))
	}
}

func testNodeCancelled(t *testing.T, s nodeStore) {
	n := newNode(1)
	mustCreateNodes(t, s, n)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.NodeCreate(ctx, newNode(2)); !errors.Is(err, context.Canceled) {
		t.Errorf("NodeCreate with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := s.NodeByHash(ctx, n.Hash); !errors.Is(err, context.Canceled) {
		t.Errorf("NodeByHash with a cancelled context: %v, want context.Canceled", err)
	}
	if err := s.NodeRevoke(ctx, &weir.NodeRevokeParams{ID: n.ID, At: base.Add(time.Hour)}); !errors.Is(err, context.Canceled) {
		t.Errorf("NodeRevoke with a cancelled context: %v, want context.Canceled", err)
	}
	checkNodes(t, "NodeList after cancelled calls", listNodes(t, s), []weir.Node{n})
}
