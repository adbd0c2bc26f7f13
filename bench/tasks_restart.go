package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/loadgen"
	"github.com/weir-gateway/weir/sqlite"
	"github.com/weir-gateway/weir/task"
)

// Restart is `weir-bench tasks restart`, docs/benchmarks.md's "restart"
// scenario, on the same rig as Drain.
//
// It submits c.Tasks tasks to a gateway with one worker while the first
// task's upstream job runs for an hour, so all the others wait (with
// c.Fill "store", only the first through the gateway: the others are
// written into its database once it is killed, see TasksConfig.Fill);
// kills the gateway with SIGKILL; times listing the waiting tasks from the database
// alone; restarts the gateway on the same database with two workers; and
// prints the time from the new process's start until it serves HTTP, and
// until the first waiting task reaches the upstream (admitted, its River
// job committed, fetched and submitted), with
// the recovery's time from the gateway's log, the process's peak RSS, and
// how long a GET of the last queued task takes (its queue position is
// counted at each GET).
func Restart(ctx context.Context, out io.Writer, c TasksConfig) error {
	if err := c.validate(false); err != nil {
		return err
	}
	if c.Fleet.Replicas > 0 {
		return restartFleet(ctx, out, c)
	}
	r, err := newTasksRig(ctx, c, time.Hour, 1)
	if err != nil {
		return err
	}
	defer r.close()
	g, err := startTasksGateway(c.Weir, r.config)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "weir-bench tasks restart: %d tasks, one worker busy for an hour, filled through %s; load average %s\n", c.Tasks, fillName(c.Fill), loadAverage())
	lastID, err := fillRestart(ctx, out, c, r, g)
	if err != nil {
		return err
	}
	// What listing the waiting tasks alone costs, as recovery lists them.
	store, err := sqlite.Open(ctx, r.db)
	if err != nil {
		return err
	}
	listStart := time.Now()
	_, err = store.TaskList(ctx, weir.TaskFilter{Statuses: []weir.TaskStatus{weir.TaskQueued}})
	listed := time.Since(listStart)
	store.Close()
	if err != nil {
		return err
	}

	// Restart with two workers: the running task gets its lease back and
	// the second worker takes the head of the queue.
	if err := writeTasksConfig(r.config, r.db, r.up.url, 2, c); err != nil {
		return err
	}
	r.up.resetFirst()
	g, err = startTasksGateway(c.Weir, r.config)
	if err != nil {
		return err
	}
	defer g.kill()
	serving := g.serving.Sub(g.started)
	first, verdict, err := waitFirstSubmit(ctx, r.up, g.started)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "restart  waiting %d  process start->serving %s  process start->first admission reached the upstream %s (target <= 2s: %s)  recovery (log): %s, of which listing them %s (measured alone)  peak RSS %s\n",
		c.Tasks-1, serving.Round(time.Millisecond), first.Round(time.Millisecond), verdict, g.recovered, listed.Round(time.Millisecond), g.peakRSS())

	// A client polling the last task in the queue: its position is
	// counted at each GET.
	var lat []time.Duration
	for range 21 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.url+"/v1/tasks/"+lastID, nil)
		req.Header.Set("Authorization", "Bearer "+r.secret)
		t0 := time.Now()
		resp, err := r.client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		lat = append(lat, time.Since(t0))
	}
	p := loadgen.Summarize(lat)
	fmt.Fprintf(out, "status GET /v1/tasks/{last of %d queued}: median %s, max %s\n", c.Tasks-1, p.P50.Round(10*time.Microsecond), p.Max.Round(10*time.Microsecond))
	return nil
}

// submitProgress returns the progress callback of a submission of n
// tasks begun at start: every 10 s, and at the end, a line with the
// tasks submitted so far, their rate, and what state adds (if set).
// Callbacks may come from several goroutines at once.
func submitProgress(out io.Writer, start time.Time, n int, state func() string) func(done int) {
	var mu sync.Mutex
	last := start
	return func(done int) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if now.Sub(last) < 10*time.Second && done != n {
			return
		}
		last = now
		line := fmt.Sprintf("  submitting: %d of %d in %s (%.0f/s)", done, n, now.Sub(start).Round(time.Second), float64(done)/now.Sub(start).Seconds())
		if state != nil {
			line += "; " + state()
		}
		fmt.Fprintln(out, line)
	}
}

func fillName(fill string) string {
	if fill == "store" {
		return "the store (the first task through HTTP)"
	}
	return "HTTP"
}

// fillRestart queues c.Tasks tasks on g, the first of which runs for an
// hour, as c.Fill says, and kills g with SIGKILL; it returns the id of
// the last task queued.
func fillRestart(ctx context.Context, out io.Writer, c TasksConfig, r *tasksRig, g *tasksGateway) (string, error) {
	defer g.kill()
	start := time.Now()
	n := c.Tasks
	if c.Fill == "store" {
		n = 1
	}
	lastID, err := r.submitAll(ctx, []string{g.url}, n, c.Connections, submitProgress(out, start, n, nil))
	if err != nil {
		return "", err
	}
	if err := waitWaiting(ctx, g.url, n-1); err != nil {
		return "", err
	}
	if n == 1 {
		// Running upstream before the kill.
		if _, _, err := waitFirstSubmit(ctx, r.up, start); err != nil {
			return "", err
		}
	}
	populate := time.Since(start)
	rss := g.peakRSS()
	g.kill()
	fmt.Fprintf(out, "  populated %d in %s (%.0f tasks/s); peak RSS %s; killed with SIGKILL\n", n, populate.Round(time.Millisecond), float64(n)/populate.Seconds(), rss)
	if n == c.Tasks {
		return lastID, nil
	}
	return fillStore(ctx, out, r.db, lastID, c.Tasks-1)
}

// fillStoreBatch is how many tasks fillStore writes a transaction.
const fillStoreBatch = 10_000

// fillStore writes n queued tasks into the SQLite file db, each a copy
// of task first (submitted through HTTP, so shaped as the gateway stores
// them) with an id and creation time of its own, in batches of
// fillStoreBatch; it returns the id of the last.
func fillStore(ctx context.Context, out io.Writer, db, first string, n int) (string, error) {
	store, err := sqlite.Open(ctx, db)
	if err != nil {
		return "", err
	}
	defer store.Close()
	tmpl, err := store.TaskGet(ctx, first)
	if err != nil {
		return "", err
	}
	maxWait := tmpl.Deadline.Sub(tmpl.CreatedAt)
	start := time.Now()
	progress := submitProgress(out, start, n, nil)
	var last string
	batch := make([]*weir.Task, 0, fillStoreBatch)
	for done := 0; done < n; {
		batch = batch[:0]
		for i := done; i < min(n, done+fillStoreBatch); i++ {
			t := tmpl
			t.ID, t.Seq = task.NewID("task"), 0
			t.Status, t.PlatformModel, t.Candidate, t.Progress, t.UpstreamID = weir.TaskQueued, "", -1, 0, ""
			t.AdmittedAt, t.FinishedAt, t.IdempotencyKey, t.Fingerprint = time.Time{}, time.Time{}, "", ""
			t.CreatedAt = time.Now()
			t.Deadline = t.CreatedAt.Add(maxWait)
			batch = append(batch, &t)
		}
		if err := store.TaskCreateMany(ctx, batch); err != nil {
			return "", err
		}
		done += len(batch)
		last = batch[len(batch)-1].ID
		progress(done)
	}
	fmt.Fprintf(out, "  wrote %d queued tasks into the store in %s (%.0f tasks/s), %d a transaction\n",
		n, time.Since(start).Round(time.Millisecond), float64(n)/time.Since(start).Seconds(), fillStoreBatch)
	return last, nil
}

// waitWaiting waits until the workers scope at url has n waiting.
func waitWaiting(ctx context.Context, url string, n int) error {
	for {
		_, waiting, err := workersScope(url)
		if err != nil {
			return err
		}
		if waiting == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond): // polling the queue
		}
	}
}

// waitFirstSubmit waits until a task reaches the upstream after a
// restart at started, and returns when it did, counted from started,
// with the restart target's verdict.
func waitFirstSubmit(ctx context.Context, up *tasksUpstream, started time.Time) (time.Duration, string, error) {
	for up.firstSubmit().IsZero() {
		if time.Since(started) > 5*time.Minute {
			return 0, "", errors.New("no task reached the upstream within 5 minutes of the restart")
		}
		select {
		case <-ctx.Done():
			return 0, "", ctx.Err()
		case <-time.After(time.Millisecond): // polling the upstream's record
		}
	}
	first := up.firstSubmit().Sub(started)
	if first > 2*time.Second {
		return first, "missed", nil
	}
	return first, "met", nil
}
