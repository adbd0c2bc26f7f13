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
)

// Restart is `weir-bench tasks restart`, docs/benchmarks.md's "restart"
// scenario, on the same rig as Drain.
//
// It submits c.Tasks tasks to a gateway with one worker while the first
// task's upstream job runs for an hour, so all the others wait; kills the
// gateway with SIGKILL; times listing the waiting tasks from the database
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
	fmt.Fprintf(out, "weir-bench tasks restart: %d tasks, one worker busy for an hour; load average %s\n", c.Tasks, loadAverage())
	start := time.Now()
	lastID, err := r.submitAll(ctx, []string{g.url}, c.Tasks, c.Connections, submitProgress(out, start, c.Tasks, nil))
	if err != nil {
		g.kill()
		return err
	}
	populate := time.Since(start)
	if err := waitWaiting(ctx, g.url, c.Tasks-1); err != nil {
		g.kill()
		return err
	}
	rss := g.peakRSS()
	g.kill()
	fmt.Fprintf(out, "  populated in %s (%.0f tasks/s); peak RSS %s; killed with SIGKILL\n", populate.Round(time.Millisecond), float64(c.Tasks)/populate.Seconds(), rss)
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
