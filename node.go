package weir

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Node is an edge node: a machine with GPUs of its own, running `weir
// node`, that dials in to the gateway and authenticates with a node token.
//
// A node token looks like "wn-" followed by 40 base62 characters (made by
// keys.GenerateNodeToken). Like an API key's secret it is shown once, when
// the node is created, and never stored: the store keeps its SHA-256 hash,
// to find the node when it presents the token (NodeStore.NodeByHash), and
// a short prefix, to recognise it in listings.
type Node struct {
	// ID is "node_" and 12 lowercase hex characters (NodeIDPrefix,
	// ValidNodeID).
	ID string
	// Name is the operator's name for the node, unique among all nodes,
	// revoked ones included, so that a name always means one node. It is
	// 1 to 100 bytes of printable UTF-8, without spaces at either end, and
	// never has the shape of a node ID, so that a command given an ID or
	// a name can tell which it is.
	Name string
	// Prefix is the start of the token, to recognise it in listings; at
	// most MaxNodePrefixLen bytes, so that it is never the whole token.
	Prefix string
	Hash   string // hex SHA-256 of the token
	// CreatedAt is required; RevokedAt is zero while the node is active.
	CreatedAt, RevokedAt time.Time
}

const (
	// NodeIDPrefix starts every node ID.
	NodeIDPrefix = "node_"
	// nodeIDHex is the number of hex characters after NodeIDPrefix.
	nodeIDHex = 12
	// MaxNodeNameLen is the longest Name, in bytes.
	MaxNodeNameLen = 100
	// MaxNodePrefixLen is the longest Prefix, in bytes: well short of a
	// token (43 bytes), so that storing a whole token as the prefix is
	// refused.
	MaxNodePrefixLen = 16
)

// Active reports whether the node may connect.
func (n Node) Active() bool { return n.RevokedAt.IsZero() }

// Validate reports what a store refuses in a node it is asked to create: a
// *FieldError (matching ErrInvalid) naming the first field at fault.
func (n Node) Validate() error {
	switch {
	case !ValidNodeID(n.ID):
		return invalidf("id", "%q is not %q and %d lowercase hex characters", n.ID, NodeIDPrefix, nodeIDHex)
	case n.Name == "":
		return invalidf("name", "required")
	case len(n.Name) > MaxNodeNameLen:
		return invalidf("name", "%d bytes, more than %d", len(n.Name), MaxNodeNameLen)
	case !printable(n.Name):
		return invalidf("name", "%q is not printable UTF-8", n.Name)
	case strings.TrimSpace(n.Name) != n.Name:
		return invalidf("name", "%q has spaces at an end", n.Name)
	case ValidNodeID(n.Name):
		return invalidf("name", "%q has the shape of a node id", n.Name)
	case n.Prefix == "":
		return invalidf("prefix", "required")
	case len(n.Prefix) > MaxNodePrefixLen || !printable(n.Prefix):
		return invalidf("prefix", "want at most %d printable bytes", MaxNodePrefixLen)
	case !hexSHA256(n.Hash):
		return invalidf("hash", "want the hex SHA-256 of the token (64 lowercase hex characters)")
	case n.CreatedAt.IsZero():
		return invalidf("created_at", "required")
	}
	return nil
}

// ValidNodeID reports whether id has the shape of a node ID: NodeIDPrefix
// and 12 lowercase hex characters.
func ValidNodeID(id string) bool {
	rest, ok := strings.CutPrefix(id, NodeIDPrefix)
	return ok && len(rest) == nodeIDHex && lowerHex(rest)
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

func hexSHA256(s string) bool { return len(s) == 64 && lowerHex(s) }

func lowerHex(s string) bool {
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
