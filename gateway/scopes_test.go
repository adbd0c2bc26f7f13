package gateway

import (
	"strconv"
	"testing"

	"github.com/weir-gateway/weir"
)

// TestCountRequests: the requests of two keys, waiting and in flight on a
// group, platform models, the acceptance runs' copy of one and a node,
// count once each, from the key scopes alone.
func TestCountRequests(t *testing.T) {
	t.Parallel()
	scopes := []ScopeView{
		{Name: weir.KeyScope("key_a"), Waiting: 2, Leases: 1},
		{Name: weir.KeyScope("key_b"), Waiting: 1},
		{Name: weir.AcceptanceScope(weir.PlatformModelScope("up/a")), Waiting: 1, Leases: 1},
		{Name: weir.GroupScope("default"), Waiting: 4, Leases: 3},
		{Name: weir.PlatformModelScope("up/a"), Waiting: 4, Leases: 1},
		{Name: weir.PlatformModelScope("up/b"), Waiting: 4},
		{Name: weir.NodeScope("n1", "p"), Waiting: 3, Leases: 2},
	}
	if got, want := CountRequests(scopes), (Requests{Waiting: 3, InFlight: 1}); got != want {
		t.Fatalf("CountRequests = %+v, want %+v", got, want)
	}
}

// The interned scope names are the weir package's, and a full table
// starts again rather than grow.
func TestScopeNames(t *testing.T) {
	var tbl nameTable
	for i := range maxScopeNames + 10 {
		id := strconv.Itoa(i)
		if got, want := tbl.get(keyScopeKind, id), weir.KeyScope(id); got != want {
			t.Fatalf("key scope %q, want %q", got, want)
		}
	}
	if n := namesHeld(&tbl); n > maxScopeNames {
		t.Fatalf("%d names kept, want at most %d", n, maxScopeNames)
	}
	if got, want := tbl.get(groupScopeKind, "g"), weir.GroupScope("g"); got != want {
		t.Errorf("group scope %q, want %q", got, want)
	}
	if got, want := tbl.get(pmScopeKind, "p/m"), weir.PlatformModelScope("p/m"); got != want {
		t.Errorf("platform model scope %q, want %q", got, want)
	}
	if a, b := tbl.get(groupScopeKind, "x"), tbl.get(keyScopeKind, "x"); a == b {
		t.Errorf("group and key scopes of one name are both %q", a)
	}
}

// namesHeld is how many names t's maps hold.
func namesHeld(t *nameTable) int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n := 0
	for _, m := range t.m {
		n += len(m)
	}
	return n
}
