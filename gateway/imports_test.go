package gateway

import (
	"go/build"
	"slices"
	"testing"
)

// The gateway reaches upstreams through adapters only: the simulation run
// mode's simulator is the providers' (provider/simulate), so the gateway
// never imports the mock provider itself.
func TestImportsNoMockProvider(t *testing.T) {
	t.Parallel()
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(pkg.Imports, "github.com/weir-gateway/weir/provider/mock") {
		t.Errorf("gateway imports provider/mock; the simulator belongs in provider/simulate")
	}
}
