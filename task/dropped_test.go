package task

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/weir-gateway/weir/admission"
)

// droppedMetrics records the errors counted as dropped.
type droppedMetrics struct {
	noMetrics
	mu  sync.Mutex
	ops []string
}

func (m *droppedMetrics) DroppedError(op string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ops = append(m.ops, op)
}

// TestDropped: a release or a cancel that fails for a reason other than
// a routine one (admission.Routine) is counted under its step.
func TestDropped(t *testing.T) {
	t.Parallel()
	m := &droppedMetrics{}
	s := &Service{cfg: Config{Metrics: m}, logger: slog.New(slog.DiscardHandler)}
	s.dropped("release", nil)
	s.dropped("release", fmt.Errorf("release l1: %w", admission.ErrLeaseNotHeld))
	s.dropped("cancel", admission.ErrNotQueued)
	s.dropped("release", errors.New("the fleet's leader refused the release"))
	if fmt.Sprint(m.ops) != "[release]" {
		t.Errorf("counted %v, want [release]", m.ops)
	}
}
