package gateway

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
)

// TestTaskErrorCategories: what the task service refuses a submission
// with maps to the category the API answers with, a wait already over
// included (a task that asked for no wait while capacity was taken).
func TestTaskErrorCategories(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want error
		msg  string
	}{
		{&admission.QueueFullError{Scope: "pm:up/v", Limit: 3}, ErrQueueFull, "the queue of platform model up/v is full (queue_limit 3)"},
		{&admission.TimeoutError{Setting: admission.SettingDeadline, RetryAfter: 4 * time.Second}, ErrQueueTimeout, "the task's own max wait passed"},
		{admission.ErrNoCandidate, ErrNoCandidate, ""},
	} {
		got := taskError("v", tc.err)
		if !errors.Is(got, tc.want) || !strings.Contains(got.Error(), tc.msg) {
			t.Errorf("taskError(%v) = %v, want %v with %q", tc.err, got, tc.want, tc.msg)
		}
	}
	if other := errors.New("disk full"); taskError("v", other) != other {
		t.Error("an error of no category is not returned as it is")
	}
}
