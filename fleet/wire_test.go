package fleet

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/weir-gateway/weir/admission"
)

// TestWireErrorsKeepIdentity: an error sent in a reply is, at the other
// end, still the sentinel it wraps, a caller's own cancellation
// included: a leader's call for its own replica runs under that
// caller's context.
func TestWireErrorsKeepIdentity(t *testing.T) {
	for _, want := range []error{context.Canceled, context.DeadlineExceeded, admission.ErrNoCandidate, ErrUnavailable} {
		got := encodeErr(fmt.Errorf("waiting for the term: %w", want)).err()
		if !errors.Is(got, want) {
			t.Errorf("%v came back as %v, which is not it", want, got)
		}
	}
}
