package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/weir-gateway/weir"
)

// restartFleet is Restart with c.Fleet's replicas on PostgreSQL: each
// with one worker, the tasks submitted to each in turn, so that the
// fleet's two first tasks run upstream for an hour and the rest wait;
// then every replica is killed with SIGKILL at once, as a power cut
// would, and started again on the same schema with two workers each. It
// prints the time from the first restarted process's start until every
// replica serves, and until the first waiting task reaches the upstream:
// the new leader elected, the queue recovered from the store, an
// admission committed with its fence and its River job fetched and
// submitted.
func restartFleet(ctx context.Context, out io.Writer, c TasksConfig) error {
	r, err := newTasksRig(ctx, c, time.Hour, 1)
	if err != nil {
		return err
	}
	defer r.close()
	p := fleetParams{Weir: c.Weir, Fleet: c.Fleet, Dir: r.dir, Rest: tasksCatalog(r.up.url, 1, c),
		Key: &weir.APIKey{Name: "bench-tasks", Group: "default"}}
	f, err := startFleet(ctx, p)
	if err != nil {
		return err
	}
	defer f.stop()
	r.secret = f.secret
	running := c.Fleet.Replicas
	if err := waitWorkersLimit(ctx, f.urls()[0], int64(running), time.Minute); err != nil {
		return err
	}
	fmt.Fprintf(out, "weir-bench tasks restart: %d tasks on a fleet of %d on PostgreSQL, one worker each busy for an hour; load average %s\n",
		c.Tasks, c.Fleet.Replicas, loadAverage())
	start := time.Now()
	if _, err := r.submitAll(ctx, f.urls(), c.Tasks, c.Connections, nil); err != nil {
		return err
	}
	populate := time.Since(start)
	if err := waitWaiting(ctx, f.urls()[0], c.Tasks-running); err != nil {
		return err
	}
	for _, ch := range f.replicas {
		ch.kill()
	}
	fmt.Fprintf(out, "  populated in %s (%.0f tasks/s); every replica killed with SIGKILL\n",
		populate.Round(time.Millisecond), float64(c.Tasks)/populate.Seconds())

	r.up.resetFirst()
	if err := f.restart(ctx, p, tasksCatalog(r.up.url, 2, c)); err != nil {
		return err
	}
	started, serving := f.replicas[0].started, f.replicas[0].serving
	for _, ch := range f.replicas {
		if ch.started.Before(started) {
			started = ch.started
		}
		if ch.serving.After(serving) {
			serving = ch.serving
		}
	}
	first, verdict, err := waitFirstSubmit(ctx, r.up, started)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "restart (fleet of %d on PostgreSQL)  waiting %d  first process start->every replica serving %s  ->first admission reached the upstream %s (target <= 2s: %s)  leader %s\n",
		c.Fleet.Replicas, c.Tasks-running, serving.Sub(started).Round(time.Millisecond), first.Round(time.Millisecond), verdict, f.leader())
	if w := f.warnings(); w != "" {
		fmt.Fprintf(out, "  warnings: %s\n", w)
	}
	return nil
}

// restart starts f's replicas again, after they were killed, on the same
// schema, with rest as their config's catalog, all at once (as a fleet
// brought back after a power cut is: a replica that leads waits for the
// others it knew of to sync), and returns once every one answers /readyz.
func (f *fleetRun) restart(ctx context.Context, p fleetParams, rest string) error {
	errs := make([]error, len(f.ids))
	var wg sync.WaitGroup
	for i, id := range f.ids {
		wg.Go(func() { f.replicas[i], errs[i] = f.startReplica(p, id, rest) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i, c := range f.replicas {
		if err := waitReady(ctx, c.url, time.Minute); err != nil {
			return fmt.Errorf("replica %s: %w", f.ids[i], err)
		}
	}
	return nil
}
