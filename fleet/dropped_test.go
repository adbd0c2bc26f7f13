package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/weir-gateway/weir/admission"
)

// TestDropped: an error of a step nobody waits for is counted under its
// op, unless it is one such a step meets in the normal course.
func TestDropped(t *testing.T) {
	t.Parallel()
	var counted []string
	cfg := &Config{Dropped: func(op string) { counted = append(counted, op) }}
	log := slog.New(slog.DiscardHandler)
	for _, err := range []error{nil, admission.ErrClosed, admission.ErrLeaseNotHeld, admission.ErrNotQueued,
		admission.ErrUnknownScope, admission.ErrStaleOwner, fmt.Errorf("fence n1: %w", admission.ErrFenced), context.Canceled} {
		dropped(cfg, log, "routine", err)
	}
	dropped(cfg, log, "fence", errors.New("the leader's engine refused the fence"))
	dropped(cfg, log, "release", fmt.Errorf("release: %w", ErrUnavailable))
	if want := []string{"fence", "release"}; fmt.Sprint(counted) != fmt.Sprint(want) {
		t.Errorf("counted %v, want %v", counted, want)
	}
	dropped(&Config{}, log, "fence", errors.New("no counter set")) // must not panic
}
