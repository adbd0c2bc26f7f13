package gateway

import (
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
