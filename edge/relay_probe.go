package edge

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/weir-gateway/weir/clock"
)

// While a Relay has runs on another replica it probes that replica
// (GET /healthz) every ProbeInterval: one that answers none of
// ProbeMisses probes in a row, and sends nothing of any run it has
// meanwhile, frozen or cut off, has its runs cut then, rather than at
// the idle bound, which a long silence of a runtime must be allowed.
// Silence is what counts, not refusal: a replica that refuses the
// connection is up, and stopping (its listener closed while it drains
// the runs it has); one whose process died has reset their connections
// already. A replica that cannot reach PostgreSQL but still answers
// keeps its runs: work already admitted runs on.

// errRelaySilent is why the runs of a replica that answered no probe
// were cut.
var errRelaySilent = errors.New("the replica the node dialed answers nothing")

// inflight is a relayed run, from its request to its body's Close (or
// its context's end).
type inflight struct {
	base   string
	cancel context.CancelCauseFunc
	// progressed: some of the answer came since the last probe round.
	progressed atomic.Bool
}

// track counts a run on base, whose context is ctx, until the returned
// func is called or ctx ends.
func (r *Relay) track(ctx context.Context, base string, cancel context.CancelCauseFunc) *inflight {
	f := &inflight{base: base, cancel: cancel}
	r.mu.Lock()
	r.runs[f] = struct{}{}
	r.mu.Unlock()
	context.AfterFunc(ctx, func() {
		r.mu.Lock()
		delete(r.runs, f)
		r.mu.Unlock()
	})
	return f
}

// bases lists the replicas this Relay has runs on now, each with whether
// one of its runs progressed since the last call.
func (r *Relay) bases() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]bool)
	for f := range r.runs {
		out[f.base] = f.progressed.Swap(false) || out[f.base]
	}
	return out
}

// cut ends every run on base for cause, and reports how many.
func (r *Relay) cut(base string, cause error) int {
	r.mu.Lock()
	var cancels []context.CancelCauseFunc
	for f := range r.runs {
		if f.base == base {
			cancels = append(cancels, f.cancel)
		}
	}
	r.mu.Unlock()
	for _, c := range cancels {
		c(cause)
	}
	return len(cancels)
}

// Start runs the probes (Run) until Stop.
func (r *Relay) Start(context.Context) error {
	r.probes.Go(func(ctx context.Context) error {
		r.Run(ctx)
		return nil
	})
	return nil
}

// Stop ends Start's probes.
func (r *Relay) Stop(ctx context.Context) error { return r.probes.Stop(ctx) }

// Run probes the replicas this Relay has runs on until ctx ends: a
// round every ProbeInterval, each probe bounded by it.
func (r *Relay) Run(ctx context.Context) {
	tick := make(chan struct{}, 1)
	arm := func() clock.Timer {
		return r.cfg.Clock.AfterFunc(r.cfg.ProbeInterval, func() {
			select {
			case tick <- struct{}{}:
			default:
			}
		})
	}
	misses := map[string]int{}
	t := arm()
	for {
		if r.roundDone != nil {
			r.roundDone()
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-tick:
		}
		t = arm()
		bases := r.bases()
		for base := range misses {
			if _, ok := bases[base]; !ok {
				delete(misses, base)
			}
		}
		answered := r.probeAll(ctx, bases)
		if ctx.Err() != nil {
			// The probes were cut short by the end, not by the replicas.
			t.Stop()
			return
		}
		for base, progressed := range bases {
			if progressed || answered[base] {
				delete(misses, base)
				continue
			}
			if misses[base]++; misses[base] >= r.cfg.ProbeMisses {
				n := r.cut(base, errRelaySilent)
				r.deps.Logger.Warn("edge: a replica relayed to answers nothing; its runs are cut", "replica", base,
					"probes_missed", misses[base], "runs", n)
				delete(misses, base)
			}
		}
	}
}

// probeAll probes each of bases at once; each probe may take until the
// next is due.
func (r *Relay) probeAll(ctx context.Context, bases map[string]bool) map[string]bool {
	var mu sync.Mutex
	answered := make(map[string]bool, len(bases))
	var wg sync.WaitGroup
	for base := range bases {
		wg.Go(func() {
			ok := r.probe(ctx, base)
			mu.Lock()
			answered[base] = ok
			mu.Unlock()
		})
	}
	wg.Wait()
	return answered
}

// probe reports whether the replica at base answers its health check,
// whatever it says, or refuses the connection, within ProbeInterval.
func (r *Relay) probe(ctx context.Context, base string) bool {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := clock.NewWatch(r.cfg.Clock, r.cfg.ProbeInterval, cancel)
	w.Arm()
	defer w.Stop()
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/healthz", nil)
	if err != nil {
		return false
	}
	resp, err := r.cfg.Client.Do(req)
	if err != nil {
		return errors.Is(err, syscall.ECONNREFUSED)
	}
	drain(resp.Body)
	// A proxy in front that finds nothing behind it answers for it.
	return resp.StatusCode != http.StatusBadGateway && resp.StatusCode != http.StatusGatewayTimeout
}
