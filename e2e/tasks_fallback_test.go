package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
)

// twoVideoPlatforms is a catalog serving videoModel from first (preferred) and
// second.
func twoVideoPlatforms(first, second string) string {
	return fmt.Sprintf(`
tasks:
  workers: 8
  poll_min: 50ms
  poll_max: 250ms
platforms:
  - name: first
    base_url: %s
  - name: second
    base_url: %s
platform_models:
  - name: first/sora
    platform: first
    upstream: sora-2
  - name: second/sora
    platform: second
    upstream: sora-2
models:
  - name: %s
    kind: video
    candidates:
      - platform_model: first/sora
        priority: 10
      - platform_model: second/sora
        priority: 0
`, first, second, videoModel)
}

// TestTaskMovesOffSaturatedPlatform: a model runs on two platforms, the
// first preferred. The first's account is full (its one job slot taken,
// 429 with a Retry-After of a minute for anything more), though the
// gateway's own limits let it admit more. A task admitted to it and
// refused goes back to the queue and runs on the second platform at once,
// rather than waiting out the first's Retry-After.
func TestTaskMovesOffSaturatedPlatform(t *testing.T) {
	t.Parallel()
	full := startVideoUpstream(t, mock.Config{JobDuration: time.Minute, MaxJobs: 1, RetryAfter: time.Minute})
	spare := startVideoUpstream(t, mock.Config{JobDuration: 300 * time.Millisecond})
	g := startGateway(t, "", twoVideoPlatforms(full.URL, spare.URL))
	_, key := g.createKey(t)

	hog, _ := g.submitTask(t, key, taskBody("hog", ""), "")
	waitFor(t, 10*time.Second, "the first task to take the full platform's one slot", func() bool { return len(full.Mock.Jobs()) == 1 })

	o, _ := g.submitTask(t, key, taskBody("moved", ""), "")
	final := g.waitTerminal(t, key, []string{o.ID}, 15*time.Second)
	if got := final[o.ID]; got.Status != "succeeded" {
		t.Fatalf("task refused by the full platform ended %s (%+v), want succeeded on the spare one", got.Status, got.Error)
	}
	if st := full.Mock.Stats(); st.JobsRejected == 0 {
		t.Errorf("the full platform refused nothing: the task never tried it (%+v)", st)
	}
	if jobs := spare.Mock.Jobs(); len(jobs) != 1 || jobs[0].Prompt != "moved" {
		t.Errorf("spare platform's jobs %+v, want the moved task's alone", jobs)
	}
	if got := g.getTask(t, key, hog.ID); got.Status != "running" {
		t.Errorf("the first task is %s, want still running on the full platform", got.Status)
	}
}

// TestTaskMovesOffFailingPlatform: the preferred platform answers every
// submit with 500 (it started nothing); the task runs on the other one at
// once instead of spending its attempts on the first.
func TestTaskMovesOffFailingPlatform(t *testing.T) {
	t.Parallel()
	failing := startVideoUpstream(t, mock.Config{ErrorRate: 1})
	good := startVideoUpstream(t, mock.Config{JobDuration: 300 * time.Millisecond})
	g := startGateway(t, "", twoVideoPlatforms(failing.URL, good.URL))
	_, key := g.createKey(t)
	o, _ := g.submitTask(t, key, taskBody("moved", ""), "")
	final := g.waitTerminal(t, key, []string{o.ID}, 10*time.Second)
	if got := final[o.ID]; got.Status != "succeeded" {
		t.Fatalf("task ended %s (%+v), want succeeded on the working platform", got.Status, got.Error)
	}
	if n := len(failing.Submits()); n != 1 {
		t.Errorf("the failing platform saw %d submits, want 1 (then the task moved)", n)
	}
	if jobs := good.Mock.Jobs(); len(jobs) != 1 {
		t.Errorf("working platform's jobs %+v, want one", jobs)
	}
}

// TestTaskMetrics: /metrics counts a task's transitions, how long it
// waited and ran, and its webhook's delivery.
func TestTaskMetrics(t *testing.T) {
	t.Parallel()
	c := startCrashRig(t, mock.Config{JobDuration: 200 * time.Millisecond}, taskOptions{}, nil)
	ids := c.submit(t, "metered", 1)
	c.g.waitTerminal(t, c.key, ids, 10*time.Second)
	waitFor(t, 10*time.Second, "the task's webhook", func() bool { return len(c.hooks.byTask()[ids[0]]) == 1 })
	var text string
	waitFor(t, 5*time.Second, "the delivery to be counted", func() bool {
		text = string(c.g.do(t, request{Method: http.MethodGet, Path: "/metrics"}).Body)
		v, _ := metric(text, "weir_task_webhook_attempts_total", `outcome="delivered"`)
		return v == 1
	})
	for _, m := range []struct {
		name   string
		labels []string
	}{
		{"weir_task_transitions_total", []string{`status="queued"`}},
		{"weir_task_transitions_total", []string{`status="running"`}},
		{"weir_task_transitions_total", []string{`status="succeeded"`}},
		{"weir_task_queue_wait_seconds_count", []string{`model="` + videoModel + `"`}},
		{"weir_task_run_seconds_count", []string{`model="` + videoModel + `"`, `status="succeeded"`}},
	} {
		if v, ok := metric(text, m.name, m.labels...); v != 1 {
			t.Errorf("%s%v = %v (found %v), want 1", m.name, m.labels, v, ok)
		}
	}
}

// TestTaskFailedJobRetried: an upstream job that ends failed (not for the
// request's fault) is retried as a new job, with its own Idempotency-Key,
// after a backoff; the task succeeds when one does, and fails with the
// upstream's code once max_attempts jobs have failed.
func TestTaskFailedJobRetried(t *testing.T) {
	t.Parallel()
	up := startVideoUpstream(t, mock.Config{JobDuration: 100 * time.Millisecond, JobFailureRate: 1})
	g := startGateway(t, "", strings.Replace(videoCatalog(up.URL, taskOptions{}), "tasks:\n", "tasks:\n  max_attempts: 3\n", 1))
	_, key := g.createKey(t)

	doomed, _ := g.submitTask(t, key, taskBody("doomed", ""), "")
	final := g.waitTerminal(t, key, []string{doomed.ID}, 20*time.Second)
	if got := final[doomed.ID]; got.Status != "failed" || got.Error == nil || got.Error.Code != "video_generation_failed" {
		t.Errorf("task whose every job fails ended %s %+v, want failed with the upstream's code", got.Status, got.Error)
	}
	keys := map[string]bool{}
	for _, j := range up.Mock.Jobs() {
		if j.Prompt == "doomed" {
			keys[j.IdempotencyKey] = true
		}
	}
	if len(keys) != 3 {
		t.Errorf("upstream jobs of the doomed task under keys %v, want 3 jobs (max_attempts), each with its own key", keys)
	}

	// A task whose first job fails and whose retry works succeeds.
	lucky, _ := g.submitTask(t, key, taskBody("lucky", ""), "")
	waitFor(t, 10*time.Second, "the lucky task's first job to fail", func() bool {
		for _, j := range up.Mock.Jobs() {
			if j.Prompt == "lucky" && j.Status == "failed" {
				return true
			}
		}
		return false
	})
	if err := up.Mock.Update(func(c *mock.Config) { c.JobFailureRate = 0 }); err != nil {
		t.Fatal(err)
	}
	final = g.waitTerminal(t, key, []string{lucky.ID}, 20*time.Second)
	if got := final[lucky.ID]; got.Status != "succeeded" {
		t.Errorf("task whose retried job works ended %s %+v, want succeeded", got.Status, got.Error)
	}
	g.waitNoLeases(t, 10*time.Second)
}
