package task

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
)

// A task whose wait ends without admission says which limit ended it.
func TestQueueFailureMessages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err        error
		code, want string
	}{
		{&admission.QueueFullError{Scope: "pm:up/v", Limit: 10}, "queue_full", "the queue of platform model up/v is full (queue_limit 10)"},
		{fmt.Errorf("%w: t1", admission.ErrQueueFull), "queue_full", "queue full: t1"},
		{fmt.Errorf("%w: no platform", admission.ErrNoCandidate), "no_candidate", "no candidate left: no platform"},
	} {
		if code, msg := queueFailure(tc.err); code != tc.code || msg != tc.want {
			t.Errorf("queueFailure(%v) = %q, %q; want %q, %q", tc.err, code, msg, tc.code, tc.want)
		}
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&admission.TimeoutError{Scope: "group:batch", Setting: admission.SettingMaxWait, Value: time.Hour, Waited: time.Hour},
			"the task waited 1h0m0s in the queue: group batch's max_wait (1h0m0s) passed"},
		{&admission.TimeoutError{Setting: admission.SettingDeadline, Value: time.Hour, Waited: time.Hour},
			"the task waited longer than its maximum wait (24h0m0s)"},
		{errors.New("queue timeout"), "the task waited longer than its maximum wait"},
	} {
		if got := waitEndedMessage(tc.err, 24*time.Hour); got != tc.want {
			t.Errorf("waitEndedMessage(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
