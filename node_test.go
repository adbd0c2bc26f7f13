package weir_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

func validNode() weir.Node {
	return weir.Node{
		ID:        "node_0123456789ab",
		Name:      "gpu-box-1",
		Prefix:    "wn-AbCdEfG",
		Hash:      strings.Repeat("0f", 32),
		CreatedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
	}
}

// TestNodeValidate: each refusal is a FieldError naming its field, and
// matches ErrInvalid.
func TestNodeValidate(t *testing.T) {
	t.Parallel()
	if err := validNode().Validate(); err != nil {
		t.Fatalf("a valid node: %v", err)
	}
	for _, tc := range []struct {
		what  string
		edit  func(*weir.Node)
		field string // "" for a node that must pass
	}{
		{"no id", func(n *weir.Node) { n.ID = "" }, "id"},
		{"id without the prefix", func(n *weir.Node) { n.ID = "key_0123456789ab" }, "id"},
		{"id too short", func(n *weir.Node) { n.ID = "node_0123456789a" }, "id"},
		{"id in upper case", func(n *weir.Node) { n.ID = "node_0123456789AB" }, "id"},
		{"no name", func(n *weir.Node) { n.Name = "" }, "name"},
		{"name of 100 bytes", func(n *weir.Node) { n.Name = strings.Repeat("n", 100) }, ""},
		{"name of 101 bytes", func(n *weir.Node) { n.Name = strings.Repeat("n", 101) }, "name"},
		{"name outside ASCII", func(n *weir.Node) { n.Name = "gpu-München 2" }, ""},
		{"name with a space at the start", func(n *weir.Node) { n.Name = " gpu" }, "name"},
		{"name with a space at the end", func(n *weir.Node) { n.Name = "gpu " }, "name"},
		{"name with a tab", func(n *weir.Node) { n.Name = "gpu\t1" }, "name"},
		{"name with a newline", func(n *weir.Node) { n.Name = "gpu\n1" }, "name"},
		{"name with a no-break space at the end", func(n *weir.Node) { n.Name = "gpu\u00a0" }, "name"},
		{"name not UTF-8", func(n *weir.Node) { n.Name = "gpu\xff" }, "name"},
		{"name shaped like an id", func(n *weir.Node) { n.Name = "node_aaaaaaaaaaaa" }, "name"},
		{"no prefix", func(n *weir.Node) { n.Prefix = "" }, "prefix"},
		{"the whole token as prefix", func(n *weir.Node) { n.Prefix = "wn-" + strings.Repeat("a", 40) }, "prefix"},
		{"no hash", func(n *weir.Node) { n.Hash = "" }, "hash"},
		{"hash in upper case", func(n *weir.Node) { n.Hash = strings.Repeat("0F", 32) }, "hash"},
		{"hash too short", func(n *weir.Node) { n.Hash = strings.Repeat("0f", 31) }, "hash"},
		{"no creation time", func(n *weir.Node) { n.CreatedAt = time.Time{} }, "created_at"},
		{"revoked", func(n *weir.Node) { n.RevokedAt = n.CreatedAt.Add(time.Hour) }, ""},
	} {
		n := validNode()
		tc.edit(&n)
		err := n.Validate()
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: %v, want no error", tc.what, err)
			}
			continue
		}
		var fe *weir.FieldError
		if !errors.As(err, &fe) || fe.Path != tc.field || !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("%s: %v, want a FieldError on %s matching ErrInvalid", tc.what, err, tc.field)
		}
	}
}

func TestNodeActive(t *testing.T) {
	t.Parallel()
	n := validNode()
	if !n.Active() {
		t.Errorf("a node without RevokedAt is not active")
	}
	n.RevokedAt = n.CreatedAt
	if n.Active() {
		t.Errorf("a revoked node is active")
	}
}

func TestValidNodeID(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]bool{
		"node_0123456789ab":  true,
		"node_0123456789abc": false,
		"node_":              false,
		"Node_0123456789ab":  false,
		"node_0123456789ag":  false,
		"":                   false,
	} {
		if got := weir.ValidNodeID(id); got != want {
			t.Errorf("ValidNodeID(%q) = %v, want %v", id, got, want)
		}
	}
}
