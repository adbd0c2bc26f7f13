package admission_test

import (
	"testing"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/admission/admissiontest"
)

func TestMemoryConformance(t *testing.T) {
	t.Parallel()
	admissiontest.Exercise(t, func(t *testing.T, opts admission.Options) admission.Engine {
		m := admission.NewMemory(opts)
		t.Cleanup(m.Close)
		return m
	})
}
