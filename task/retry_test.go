package task

import (
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

func TestRequestAtFault(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]bool{
		"video_generation_failed":  false,
		"internal_error":           false,
		"":                         false,
		"moderation_blocked":       true,
		"content_policy_violation": true,
		"invalid_prompt":           true,
		"SAFETY_FILTER":            true,
	} {
		if got := requestAtFault(code); got != want {
			t.Errorf("requestAtFault(%q) = %v, want %v", code, got, want)
		}
	}
}

func TestRetryBackoffGrowsWithJitterAndBound(t *testing.T) {
	t.Parallel()
	s := &Service{}
	s.cfg.defaults()
	for n, base := range map[int]time.Duration{1: time.Second, 2: 4 * time.Second, 3: 16 * time.Second, 20: retryBackoffMax} {
		for range 50 {
			if d := s.retryBackoff(n); d < base/2 || d >= base*3/2 {
				t.Fatalf("retryBackoff(%d) = %s, want in [%s, %s)", n, d, base/2, base*3/2)
			}
		}
	}
}

func TestSubmitKeyIsNewForEachRetry(t *testing.T) {
	t.Parallel()
	keys := map[string]bool{}
	for n := range 3 {
		keys[submitKey(weir.Task{ID: "video_1", Attempts: n})] = true
	}
	if !keys["video_1"] || len(keys) != 3 {
		t.Errorf("submit keys %v: want the task id first, then one of its own per retry", keys)
	}
}

func TestRunEventsOfARetryHaveTheirOwnIDs(t *testing.T) {
	t.Parallel()
	first := weir.Task{ID: "task_1", CallbackEvents: []weir.TaskEvent{weir.TaskEventProgress}}
	retry := first
	retry.Attempts = 1
	a, b := runningEvent(first, 0, time.Unix(0, 0)), runningEvent(retry, 0, time.Unix(0, 0))
	if a == nil || b == nil || a.EventID == b.EventID {
		t.Fatalf("task.running of the first job %+v and of its retry %+v: want two events with their own webhook-ids", a, b)
	}
	if a.EventID != "evt_task_1_running" {
		t.Errorf("first job's task.running id %q, want evt_task_1_running as before retries existed", a.EventID)
	}
}
