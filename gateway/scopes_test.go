package gateway

import (
	"testing"

	"github.com/weir-gateway/weir"
)

// TestCountRequests: two requests of one key and one of another, each
// waiting on a group, two platform models and a node, count three, not
// the eleven their scopes add up to.
func TestCountRequests(t *testing.T) {
	t.Parallel()
	scopes := []ScopeView{
		{Name: weir.KeyScope("key_a"), Waiting: 2, Leases: 1},
		{Name: weir.KeyScope("key_b"), Waiting: 1},
		{Name: weir.AcceptanceScope("run-1", weir.KeyScope("key_a")), Waiting: 1, Leases: 2},
		{Name: weir.GroupScope("default"), Waiting: 4, Leases: 3},
		{Name: weir.PlatformModelScope("up/a"), Waiting: 4, Leases: 1},
		{Name: weir.PlatformModelScope("up/b"), Waiting: 4},
		{Name: weir.NodeScope("n1", "p"), Waiting: 3, Leases: 2},
	}
	if got, want := CountRequests(scopes), (Requests{Waiting: 4, InFlight: 3}); got != want {
		t.Fatalf("CountRequests = %+v, want %+v", got, want)
	}
}
