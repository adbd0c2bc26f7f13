package e2e

// kill -9 of a real `weir serve` at each phase of a durable task's life,
// then a restart on the same config and database. Each test shows: every
// accepted task reaches exactly one terminal state (its status, and one
// webhook event id per task whatever was redelivered), no upstream job was
// submitted twice (one mock job per task id, resubmits deduplicated by
// Idempotency-Key counted), no lease leaked (/admin/queues empty at the
// end) and, where capacity is 1, the upstream saw the tasks in submission
// order.

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
)

// crashRig is one gateway in front of a video upstream, with a webhook
// receiver that answers 200, and one key.
type crashRig struct {
	up    *videoUpstream
	hooks *hookReceiver
	g     *gateway
	key   string
	// restartHook, if set, looks at the gateway as soon as it serves again.
	restartHook func(g *gateway)
}

func startCrashRig(t *testing.T, cfg mock.Config, o taskOptions, answer func(int, delivery, *http.Request) int) *crashRig {
	t.Helper()
	up := startVideoUpstream(t, cfg)
	secret, signer := newSecret(t)
	o.Secret, o.Loopback = secret, true
	hooks := startReceiver(t, signer, answer)
	g := startGateway(t, "", videoCatalog(up.URL, o))
	_, key := g.createKey(t)
	return &crashRig{up: up, hooks: hooks, g: g, key: key}
}

// submit submits n tasks named prefix-00, prefix-01... in order, each with
// the receiver as its callback, and returns their ids.
func (c *crashRig) submit(t *testing.T, prefix string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		o, status := c.g.submitTask(t, c.key, taskBody(fmt.Sprintf("%s-%02d", prefix, i), c.hooks.URL), "")
		if status != http.StatusAccepted || o.Status == "" {
			t.Fatalf("submit %d: %d %+v", i, status, o)
		}
		ids[i] = o.ID
	}
	return ids
}

// phase describes what the database held when the process died.
func phase(t *testing.T, g *gateway) string {
	t.Helper()
	db := openDB(t, g.DB)
	count := map[string]int{}
	for _, st := range taskRows(t, db) {
		count["task "+st]++
	}
	for _, kind := range []string{"weir_task_run", "weir_task_webhook"} {
		for _, j := range riverJobs(t, db, kind) {
			count[strings.TrimPrefix(kind, "weir_task_")+" job "+j.State]++
		}
	}
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, count[k])
	}
	return strings.TrimSpace(b.String())
}

// finish restarts after a kill and checks the outcome: every task
// succeeded, exactly once, each with one upstream job, and no lease or
// waiter is left.
func (c *crashRig) finish(t *testing.T, ids []string, within time.Duration) (dedup int64) {
	t.Helper()
	t.Logf("at the kill: %s", phase(t, c.g))
	g, since := c.g.restart(t)
	c.g = g
	serving := time.Since(since)
	if c.restartHook != nil {
		c.restartHook(g)
	}
	final := g.waitTerminal(t, c.key, ids, within)
	done := time.Since(since)
	for _, id := range ids {
		if final[id].Status != "succeeded" {
			t.Errorf("task %s ended %s (%+v), want succeeded", id, final[id].Status, final[id].Error)
		}
	}
	waitFor(t, 30*time.Second, "a webhook for every task", func() bool {
		by := c.hooks.byTask()
		for _, id := range ids {
			if len(by[id]) == 0 {
				return false
			}
		}
		return true
	})
	checkOneTerminalEach(t, c.hooks, final)
	dedup = checkSubmittedOnce(t, c.up, ids)
	g.waitNoLeases(t, 10*time.Second)
	if st := c.up.Mock.Stats(); st.JobsSubmitted != int64(len(ids)) {
		t.Errorf("mock started %d jobs for %d tasks", st.JobsSubmitted, len(ids))
	}
	t.Logf("restarted: serving after %s, all %d tasks ended after %s; %d resubmits deduplicated by Idempotency-Key, %d submits reached the mock",
		serving.Round(time.Millisecond), len(ids), done.Round(time.Millisecond), dedup, len(c.up.Submits()))
	return dedup
}

// TestTaskCrashAfterSubmit kills the gateway right after the last of a
// burst of submissions returned, so tasks are queued, admitted with their
// job not yet run, mid-submit, or just submitted upstream.
func TestTaskCrashAfterSubmit(t *testing.T) {
	t.Parallel()
	c := startCrashRig(t, mock.Config{JobDuration: 300 * time.Millisecond}, taskOptions{Workers: 4, Concurrency: 4}, nil)
	ids := c.submit(t, "after-submit", 12)
	c.g.kill9(t)
	c.finish(t, ids, 60*time.Second)
}

// TestTaskCrashWhileQueued kills the gateway while one task runs and the
// rest wait behind a capacity of 1; after the restart the upstream must
// see them in submission order.
func TestTaskCrashWhileQueued(t *testing.T) {
	t.Parallel()
	c := startCrashRig(t, mock.Config{JobDuration: 400 * time.Millisecond}, taskOptions{Workers: 8, Concurrency: 1}, nil)
	ids := c.submit(t, "queued", 6)
	waitFor(t, 10*time.Second, "the first task to run upstream", func() bool { return len(c.up.Mock.Jobs()) >= 1 })
	c.g.kill9(t)
	queued := 0
	for _, st := range taskRows(t, openDB(t, c.g.DB)) {
		if st == "queued" {
			queued++
		}
	}
	if queued < 3 {
		t.Fatalf("only %d tasks queued at the kill; the test wants several", queued)
	}
	c.restartHook = func(g *gateway) {
		// Right after the restart the waiting tasks hold their places:
		// positions never fall in submission order. (The queue drains while
		// they are read one by one, so a task admitted between two reads
		// can leave two equal; the order the mock saw is checked exactly.)
		last := 0
		for _, id := range ids {
			o := g.getTask(t, c.key, id)
			if o.Status != "queued" {
				continue
			}
			if o.Queue == nil || o.Queue.Position < last {
				t.Errorf("after the restart, queued task %s has queue %+v after position %d", id, o.Queue, last)
				continue
			}
			last = o.Queue.Position
		}
		if last == 0 {
			t.Log("no task was still queued when the restarted gateway was first asked")
		}
	}
	c.finish(t, ids, 60*time.Second)
	if got := c.up.jobOrder(); !slices.Equal(got, ids) {
		t.Errorf("upstream jobs in order\n%v\nwant submission order\n%v", got, ids)
	}
	// A kill mid-submit sends that task's submit again after the restart
	// (the upstream deduplicates it by Idempotency-Key): the order counts
	// each task's first submit.
	var first []string
	for _, id := range c.up.Submits() {
		if !slices.Contains(first, id) {
			first = append(first, id)
		}
	}
	if !slices.Equal(first, ids) {
		t.Errorf("submits reached the upstream in order\n%v\nwant\n%v", c.up.Submits(), ids)
	}
}

// TestTaskCrashWhilePolling kills the gateway while every task runs
// upstream and is being polled (waiting for its next poll); after the restart the
// tasks are polled to the end and none is submitted again.
func TestTaskCrashWhilePolling(t *testing.T) {
	t.Parallel()
	c := startCrashRig(t, mock.Config{JobDuration: 3 * time.Second}, taskOptions{Workers: 3, Concurrency: 3}, nil)
	ids := c.submit(t, "polling", 3)
	db := openDB(t, c.g.DB)
	waitFor(t, 10*time.Second, "every task to run upstream and be polled", func() bool {
		rows := taskRows(t, db)
		for _, id := range ids {
			if rows[id] != "running" {
				return false
			}
		}
		return c.up.Mock.Stats().JobPolls >= 3
	})
	c.g.kill9(t)
	c.finish(t, ids, 60*time.Second)
	if n := len(c.up.Submits()); n != len(ids) {
		t.Errorf("%d submits reached the upstream for %d tasks: a task whose upstream id was recorded was submitted again", n, len(ids))
	}
}

// TestTaskCrashMidStep kills the gateway while River jobs are in the
// middle of a step, one in each phase at once:
//
//   - mid-submit-before: admitted, its submit on the wire but not yet seen
//     by the upstream (held in front of the mock): the first upstream call
//     never happened;
//   - mid-submit-after: the upstream created the job but its answer (the
//     upstream id) never reached the gateway;
//   - mid-poll: running upstream, a poll on the wire;
//   - mid-webhook: succeeded, its webhook being delivered to a receiver
//     that hangs;
//
// with more tasks running or queued behind them. The restarted process
// reclaims those jobs at once (it is the store's only runner), without
// waiting for River's rescue_after.
func TestTaskCrashMidStep(t *testing.T) {
	t.Parallel()
	hookHang := make(chan struct{})
	var hungFor atomic.Value // the task id whose first webhook hangs
	hungFor.Store("")
	var hung atomic.Bool
	c := startCrashRig(t, mock.Config{JobDuration: time.Second}, taskOptions{Workers: 4, Concurrency: 4},
		func(n int, d delivery, r *http.Request) int {
			if d.Event.Data.ID == hungFor.Load().(string) && hung.CompareAndSwap(false, true) {
				select { // hang until the gateway dies
				case <-r.Context().Done():
				case <-hookHang:
				}
				return http.StatusServiceUnavailable
			}
			return http.StatusOK
		})
	prompts := map[string]string{} // job id → prompt, for the polls; the rule runs under the upstream's lock
	c.up.setRule(func(r *http.Request, body []byte) holdMode {
		switch r.Method {
		case http.MethodPost:
			switch {
			case bytes.Contains(body, []byte(`"mid-submit-before"`)):
				return holdBefore
			case bytes.Contains(body, []byte(`"mid-submit-after"`)):
				return holdAfter
			}
		case http.MethodGet:
			id := strings.TrimPrefix(r.URL.Path, "/v1/videos/")
			if _, ok := prompts[id]; !ok {
				for _, j := range c.up.Mock.Jobs() {
					prompts[j.ID] = j.Prompt
				}
			}
			if prompts[id] == "mid-poll" {
				return holdBefore
			}
		}
		return pass
	})
	names := []string{"mid-submit-before", "mid-submit-after", "mid-poll", "mid-webhook", "after-0", "after-1", "after-2"}
	ids := map[string]string{}
	var all []string
	for i, name := range names {
		if name == "mid-webhook" {
			waitFor(t, 10*time.Second, "three steps held at the upstream", func() bool { return c.up.heldNow() == 3 })
		}
		o, _ := c.g.submitTask(t, c.key, taskBody(name, c.hooks.URL), "")
		ids[name] = o.ID
		all = append(all, o.ID)
		if i == 3 {
			hungFor.Store(o.ID)
		}
	}
	waitFor(t, 20*time.Second, "the webhook delivery to hang", func() bool { return len(c.hooks.byTask()[ids["mid-webhook"]]) == 1 })
	db := openDB(t, c.g.DB)
	runs := riverJobs(t, db, "weir_task_run")
	hooks := riverJobs(t, db, "weir_task_webhook")
	c.g.kill9(t)
	running := 0
	for _, j := range append(runs, hooks...) {
		if j.State == "running" {
			running++
		}
	}
	if running < 4 {
		t.Fatalf("%d River jobs running at the kill, want at least 4 (three held at the upstream, one webhook)", running)
	}
	// The held requests of the killed process must see it gone before
	// the gate opens: one that saw the gate first would reach the mock
	// after its caller died.
	waitFor(t, 10*time.Second, "the held requests to see their caller gone", func() bool { return c.up.heldNow() == 0 })
	c.up.open()
	close(hookHang)

	dedup := c.finish(t, all, 60*time.Second)
	jobs := c.up.jobsByTask()
	for name, want := range map[string]int64{"mid-submit-before": 1, "mid-submit-after": 2, "mid-poll": 1} {
		js := jobs[ids[name]]
		if len(js) != 1 || js[0].Submits != want {
			t.Errorf("%s: upstream jobs %+v, want one answering %d submits", name, js, want)
		}
	}
	if dedup != 1 {
		t.Errorf("%d resubmits deduplicated, want 1 (mid-submit-after's)", dedup)
	}
	// The hung delivery's job is reclaimed like the others and runs again.
	waitFor(t, 30*time.Second, "the hung webhook to be delivered again", func() bool {
		return len(c.hooks.byTask()[ids["mid-webhook"]]) >= 2
	})
	checkOneTerminalEach(t, c.hooks, map[string]taskObject{ids["mid-webhook"]: {Status: "succeeded"}})
	ds := c.hooks.byTask()[ids["mid-webhook"]]
	if ds[0].ID != ds[len(ds)-1].ID {
		t.Errorf("mid-webhook: deliveries %+v, want the hung one redelivered with the same webhook-id", ds)
	}
}

// TestTaskRescueAfterBelowJobTimeout: tasks.rescue_after is documented as
// any duration (default 2m), and a short one is what lets a crashed
// process's tasks be taken over quickly; River refuses one below the job
// timeout the task service sets (1m), and `weir serve` does not start.
func TestTaskRescueAfterBelowJobTimeout(t *testing.T) {
	t.Parallel()
	up := startVideoUpstream(t, mock.Config{})
	cat := strings.Replace(videoCatalog(up.URL, taskOptions{}), "rescue_after: 1m", "rescue_after: 3s", 1)
	dir := t.TempDir()
	g := &gateway{Config: dir + "/weir.yaml", DB: dir + "/weir.db"}
	g.writeConfig(t, cat)
	cmd := exec.Command(weirBin, "serve", "-c", g.Config)
	cmd.Env = cleanEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var out strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), `"msg":"weir serving"`) {
			return
		}
	}
	t.Fatalf("weir serve with rescue_after 3s exited before serving:\n%s", out.String())
}

// TestTaskRunJobGivenUp: when River gives up a task's run job (its
// attempts, tasks.max_attempts, are spent on errors that are not the
// upstream's), the task must still end — failed — and free its
// capacity, not stay running forever. Here the job's lease cannot be
// restored after a restart because the platform model it ran on is no
// longer among its model's candidates.
func TestTaskRunJobGivenUp(t *testing.T) {
	t.Parallel()
	up := startVideoUpstream(t, mock.Config{JobDuration: time.Minute})
	cat := strings.Replace(videoCatalog(up.URL, taskOptions{Workers: 4}), "rescue_after: 1m\n", "rescue_after: 1m\n  max_attempts: 2\n", 1)
	g := startGateway(t, "", cat)
	_, key := g.createKey(t)
	o, _ := g.submitTask(t, key, taskBody("orphan", ""), "")
	waitFor(t, 10*time.Second, "the task to run upstream", func() bool { return g.getTask(t, key, o.ID).Status == "running" })
	g.kill9(t)
	// The model now runs on another platform model of the same platform.
	moved := strings.Replace(cat, "      - platform_model: "+videoPM+"\n", "      - platform_model: vid/other\n", 1)
	moved = strings.Replace(moved, "platform_models:\n", "platform_models:\n  - name: vid/other\n    platform: vid\n    upstream: sora-2\n", 1)
	g.writeConfig(t, moved)
	g, _ = g.restart(t)
	db := openDB(t, g.DB)
	var job riverJob
	waitFor(t, 30*time.Second, "the run job to be given up or the task to end", func() bool {
		for _, j := range riverJobs(t, db, "weir_task_run") {
			if j.TaskID == o.ID {
				job = j
			}
		}
		return job.State == "discarded" || job.State == "cancelled" || job.State == "completed" || terminal(g.getTask(t, key, o.ID).Status)
	})
	var got taskObject
	ended := eventually(10*time.Second, func() bool { got = g.getTask(t, key, o.ID); return terminal(got.Status) })
	if job.State == "discarded" && !ended {
		t.Fatalf("River discarded task %s's run job (errors %s) and the task is still %s 10s later: no terminal state, no webhook, its upstream job never cancelled",
			o.ID, job.Errors, got.Status)
	}
	if got.Status != "failed" {
		t.Errorf("task ended %s (%+v), want failed", got.Status, got.Error)
	}
}

// TestTaskStopWhileWaitingForPoll: SIGTERM while every task's job waits in
// process for its next poll. The gateway must exit promptly — the waits
// end and the jobs snooze, rather than holding the shutdown until their
// polls are due — and after a restart the tasks are polled to the end
// without being submitted again.
func TestTaskStopWhileWaitingForPoll(t *testing.T) {
	t.Parallel()
	c := startCrashRig(t, mock.Config{JobDuration: 4500 * time.Millisecond}, taskOptions{Workers: 2, Concurrency: 2}, nil)
	ids := c.submit(t, "stop", 2)
	db := openDB(t, c.g.DB)
	waitFor(t, 10*time.Second, "both tasks to run upstream and be polled once", func() bool {
		rows := taskRows(t, db)
		return rows[ids[0]] == "running" && rows[ids[1]] == "running" && c.up.Mock.Stats().JobPolls >= 2
	})
	// Their next polls are due about 4s from now.
	stopped := time.Now()
	if err := c.g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.g.exited:
		if c.g.err != nil {
			t.Errorf("the gateway exited with %v after SIGTERM", c.g.err)
		}
		t.Logf("exited %s after SIGTERM", time.Since(stopped).Round(time.Millisecond))
	case <-time.After(2 * time.Second):
		t.Fatal("the gateway had not exited 2s after SIGTERM: jobs waiting for their next poll hold the shutdown")
	}
	for _, j := range riverJobs(t, db, "weir_task_run") {
		if j.State == "running" {
			t.Errorf("run job of task %s left running by a graceful stop", j.TaskID)
		}
	}
	c.finish(t, ids, 30*time.Second)
	if n := len(c.up.Submits()); n != len(ids) {
		t.Errorf("%d submits reached the upstream for %d tasks", n, len(ids))
	}
}

// TestTaskCrashRepeatedly kills the gateway five times while 120 tasks
// drain through it, each time as soon as the upstream has seen 20 more
// submits (at whatever step each task is then), and restarts it on the
// same database. In the end every task succeeded exactly once, with one
// upstream job each, and nothing leaked.
func TestTaskCrashRepeatedly(t *testing.T) {
	t.Parallel()
	c := startCrashRig(t, mock.Config{JobDuration: 400 * time.Millisecond}, taskOptions{Workers: 10, Concurrency: 10}, nil)
	ids := c.submit(t, "chaos", 120)
	for round, submits := range []int64{20, 40, 60, 80} {
		waitFor(t, 30*time.Second, fmt.Sprintf("%d upstream submits before kill %d", submits, round+1), func() bool {
			return c.up.Mock.Stats().JobsSubmitted >= submits
		})
		c.g.kill9(t)
		t.Logf("kill %d: %s", round+1, phase(t, c.g))
		c.g, _ = c.g.restart(t)
	}
	waitFor(t, 30*time.Second, "100 upstream submits before the last kill", func() bool { return c.up.Mock.Stats().JobsSubmitted >= 100 })
	c.g.kill9(t)
	c.finish(t, ids, 60*time.Second)
}
