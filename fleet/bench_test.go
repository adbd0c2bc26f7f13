package fleet_test

// The fleet's scenarios of docs/benchmarks.md, which holds their targets
// and figures; scripts/bench-fleet.sh runs them. Each fleet is made of
// Members in this process, each with a store (postgres.DB) of its own on
// one pgtest schema of the real PostgreSQL, elected through it and talking to the
// leader over loopback TCP, on the real clock:
//
//	BenchmarkHandoff/replicas=2     (one of the two leads)
//	BenchmarkHandoff/replicas=3     (neither of the two leads: the third does)
//	    ns/op              mean time of one handoff: from just before the
//	                       holder's Release on one replica to the Acquire of
//	                       the waiter queued on the other returning, in a
//	                       scope of limit 1; the two replicas take turns
//	    p50-µs, p99-µs     its median and 99th percentile
//	    to-leader-p50-µs, to-leader-p99-µs, to-follower-p50-µs, to-follower-p99-µs
//	                       (replicas=2) the same for the handoffs whose
//	                       waiter is on the leader, and on the follower
//	BenchmarkFleetAdmit/leader=4,follower=4   (the scenario: 4 callers on each of 2 replicas)
//	BenchmarkFleetAdmit/leader=0,follower=8   (every admission crosses a session)
//	    admissions/s       Acquire+Release of one scope whose limit is never
//	                       reached, by 8 goroutines, each as fast as its
//	                       replica answers
//	    on-leader/s, on-follower/s
//	                       the part of admissions/s made by the callers on
//	                       the leader (which reach its engine in process) and
//	                       on the follower (over the session)
//	    pgbench-tps        pgbench run right after, as long, on the same
//	                       database: 8 clients updating one row (package
//	                       bench/pgbench); only in the run whose figure is
//	                       reported (the last, of -benchtime)
//	    x-pgbench          admissions/s ÷ pgbench-tps
//
// The benchmarks are skipped when PostgreSQL does not answer, as the tests
// are (package pgtest).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/bench/pgbench"
	"github.com/weir-gateway/weir/fleet"
	"github.com/weir-gateway/weir/pgtest"
)

// benchFleet is n replicas on one schema, all synced with one leader.
type benchFleet struct {
	members []*fleet.Member
	// queued receives the id of each waiter the leader queues.
	queued chan string
}

// startBenchFleet starts n members on a schema of b's own and waits
// until every one has synced with the leader; they stop when b ends.
func startBenchFleet(b *testing.B, n int) *benchFleet {
	b.Helper()
	f := &benchFleet{queued: make(chan string, 64)}
	obs := admission.ObserverFunc(func(e admission.Event) {
		if e.Outcome == admission.OutcomeQueued {
			select {
			case f.queued <- e.WaiterID:
			default:
			}
		}
	})
	f.members = startMembers(b, n, admission.Options{Observer: obs})
	return f
}

// roles splits the fleet into its leader and followers, by the current
// term.
func (f *benchFleet) roles(b *testing.B) (leader *fleet.Member, followers []*fleet.Member) {
	b.Helper()
	for _, m := range f.members {
		if _, leading := m.Term(); leading {
			leader = m
		} else {
			followers = append(followers, m)
		}
	}
	if leader == nil {
		b.Fatal("no replica leads")
	}
	return leader, followers
}

// BenchmarkHandoff is the "handoff" scenario: release on one replica,
// admission of the waiter queued on another.
func BenchmarkHandoff(b *testing.B) {
	b.Run("replicas=2", func(b *testing.B) {
		f := startBenchFleet(b, 2)
		leader, followers := f.roles(b)
		benchHandoffs(b, f, leader, followers[0], leader)
	})
	b.Run("replicas=3", func(b *testing.B) {
		f := startBenchFleet(b, 3)
		leader, followers := f.roles(b)
		benchHandoffs(b, f, followers[0], followers[1], leader)
	})
}

// benchHandoffs hands a lease of a limit-1 scope back and forth between
// replicas x and y and reports the handoffs' latencies, split by whether
// the waiter is on the leader when one of the two leads.
func benchHandoffs(b *testing.B, f *benchFleet, x, y, leader *fleet.Member) {
	ctx := context.Background()
	const scope = "handoff"
	if err := x.Engine().SetScope(ctx, scope, admission.ScopeConfig{Limit: 1}); err != nil {
		b.Fatal(err)
	}
	cands := []admission.Candidate{{Needs: []admission.Need{{Scope: scope, Amount: 1}}}}
	var seq int
	req := func() admission.Request {
		seq++
		return admission.Request{ID: "w" + strconv.Itoa(seq), Candidates: cands}
	}
	type acquired struct {
		lease admission.Lease
		err   error
		at    time.Time
	}
	holder, waiter := x.Engine(), y.Engine()
	lease, err := holder.TryAcquire(ctx, req())
	if err != nil {
		b.Fatalf("first lease: %v", err)
	}
	var all, toLeader, toFollower []time.Duration
	for b.Loop() {
		r := req()
		got := make(chan acquired, 1)
		go func() {
			l, err := waiter.Acquire(ctx, r)
			got <- acquired{l, err, time.Now()}
		}()
		awaitQueued(b, f, r.ID)
		start := time.Now()
		if err := holder.Release(ctx, lease.ID, lease.Owner); err != nil {
			b.Fatalf("release: %v", err)
		}
		a := <-got
		if a.err != nil {
			b.Fatalf("acquire: %v", a.err)
		}
		d := a.at.Sub(start)
		all = append(all, d)
		switch {
		case leader != x && leader != y:
		case waiter == leader.Engine():
			toLeader = append(toLeader, d)
		default:
			toFollower = append(toFollower, d)
		}
		lease, holder, waiter = a.lease, waiter, holder
	}
	if err := holder.Release(ctx, lease.ID, lease.Owner); err != nil {
		b.Fatalf("last release: %v", err)
	}
	var sum time.Duration
	for _, d := range all {
		sum += d
	}
	b.ReportMetric(float64(sum.Nanoseconds())/float64(len(all)), "ns/op")
	b.ReportMetric(quantileUs(all, 0.50), "p50-µs")
	b.ReportMetric(quantileUs(all, 0.99), "p99-µs")
	if len(toLeader) > 0 && len(toFollower) > 0 {
		b.ReportMetric(quantileUs(toLeader, 0.50), "to-leader-p50-µs")
		b.ReportMetric(quantileUs(toLeader, 0.99), "to-leader-p99-µs")
		b.ReportMetric(quantileUs(toFollower, 0.50), "to-follower-p50-µs")
		b.ReportMetric(quantileUs(toFollower, 0.99), "to-follower-p99-µs")
	}
}

// BenchmarkFleetAdmit is the "fleet-admit" scenario at the engine's
// level: admissions with their releases per second through two replicas,
// against pgbench on the same database.
func BenchmarkFleetAdmit(b *testing.B) {
	f := startBenchFleet(b, 2)
	ctx := context.Background()
	const scope = "admit"
	if err := f.members[0].Engine().SetScope(ctx, scope, admission.ScopeConfig{Limit: 1000}); err != nil {
		b.Fatal(err)
	}
	const goroutines = 8
	reqs := make([]admission.Request, goroutines)
	for g := range reqs {
		reqs[g] = admission.Request{ID: "g" + strconv.Itoa(g),
			Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: scope, Amount: 1}}}}}
	}
	leader, followers := f.roles(b)
	for _, onLeader := range []int{goroutines / 2, 0} {
		name := fmt.Sprintf("leader=%d,follower=%d", onLeader, goroutines-onLeader)
		b.Run(name, func(b *testing.B) {
			callers := make([]*fleet.Engine, goroutines)
			for g := range callers {
				callers[g] = followers[0].Engine()
				if g < onLeader {
					callers[g] = leader.Engine()
				}
			}
			benchAdmit(b, callers, leader.Engine(), reqs)
		})
	}
}

// benchAdmit runs b.N Acquire+Release on callers, one goroutine each,
// and reports the rate, split by the callers on the leader and on a
// follower, and pgbench's in the run that is reported.
func benchAdmit(b *testing.B, callers []*fleet.Engine, leader *fleet.Engine, reqs []admission.Request) {
	ctx := context.Background()
	// The goroutines take operations from one count until b.N are done,
	// so that every one is busy to the end: the leader's own callers,
	// which reach it in process, would finish a fixed share early and
	// leave the follower's alone.
	var next atomic.Int64
	var done [2]atomic.Int64 // by callers on the leader, on a follower
	var wg sync.WaitGroup
	b.ResetTimer()
	for g, e := range callers {
		side := &done[1]
		if e == leader {
			side = &done[0]
		}
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				l, err := e.Acquire(ctx, reqs[g])
				if err != nil {
					b.Errorf("acquire: %v", err)
					return
				}
				if err := e.Release(ctx, l.ID, l.Owner); err != nil {
					b.Errorf("release: %v", err)
					return
				}
				side.Add(1)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	elapsed := b.Elapsed()
	rate := float64(b.N) / elapsed.Seconds()
	b.ReportMetric(rate, "admissions/s")
	b.ReportMetric(float64(done[0].Load())/elapsed.Seconds(), "on-leader/s")
	b.ReportMetric(float64(done[1].Load())/elapsed.Seconds(), "on-follower/s")
	if !reportedRun(b) {
		return
	}
	res, err := pgbench.Run(ctx, pgbench.Config{DSN: pgtest.BaseDSN(), Clients: 8, Jobs: 2, Duration: elapsed})
	if errors.Is(err, pgbench.ErrNoBinary) {
		b.Logf("no baseline: %v", err)
		return
	}
	if err != nil {
		b.Fatalf("baseline: %v", err)
	}
	b.ReportMetric(res.TPS, "pgbench-tps")
	b.ReportMetric(rate/res.TPS, "x-pgbench")
}

// reportedRun reports whether b's run is the one whose figures the
// testing package reports: the last, which reached -test.benchtime (or
// ran its fixed "Nx" count).
func reportedRun(b *testing.B) bool {
	goal, fixed := time.Second, 0
	if f := flag.Lookup("test.benchtime"); f != nil {
		s := f.Value.String()
		if count, ok := strings.CutSuffix(s, "x"); ok {
			fixed, _ = strconv.Atoi(count)
		} else if d, err := time.ParseDuration(s); err == nil {
			goal = d
		}
	}
	if fixed > 0 {
		return b.N == fixed
	}
	return b.Elapsed() >= goal || b.N >= 1e9
}

// awaitQueued waits until the leader has queued waiter id.
func awaitQueued(b *testing.B, f *benchFleet, id string) {
	b.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-f.queued:
			if got == id {
				return
			}
		case <-timeout:
			b.Fatalf("waiter %s not queued within 10s", id)
		}
	}
}

// quantileUs is the q-quantile of ds (nearest rank) in microseconds, or
// NaN when ds is empty.
func quantileUs(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return math.NaN()
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := max(0, int(math.Ceil(q*float64(len(s))))-1)
	return float64(s[i].Nanoseconds()) / 1e3
}
