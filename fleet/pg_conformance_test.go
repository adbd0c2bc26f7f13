package fleet

import (
	"testing"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/admission/admissiontest"
)

// TestConformanceOnPostgres runs the engine's conformance suite against
// two Members elected through the real PostgreSQL, each call on the next.
func TestConformanceOnPostgres(t *testing.T) {
	t.Parallel()
	admissiontest.Exercise(t, func(t *testing.T, opts admission.Options) admission.Engine {
		return spreadMembers(t, 2, opts)
	})
}
