package admission_test

// The "engine" scenario of docs/benchmarks.md, which holds its targets.
// Every line reports its figure and its ratio to a baseline measured in the
// same process, so one run is enough to judge it (scripts/bench-engine.sh
// runs them):
//
//	BenchmarkAcquireRelease/scopes=S/goroutines=G
//	    ns/op              one Acquire+Release of a request needing S scopes,
//	                       on exactly G goroutines (wall time per operation)
//	    semaphore-ns/op    the same work on S bare semaphore.Weighted
//	    x-semaphore        ns/op ÷ semaphore-ns/op
//	BenchmarkQueuedStep/waiters=N
//	    ns/op              one steady-state step with N waiters queued: a
//	                       release that admits the next waiter, plus an Enqueue
//	    1k-ns/op           the same step with 10^3 waiters queued
//	    x-1k               ns/op ÷ 1k-ns/op
//	BenchmarkPosition/shape
//	    ns/op              one Position of the last of 10^5 waiters queued
//	                       on a full scope (the poll of a client watching its
//	                       place), all the engine's lock: one=one class,
//	                       keys=10^3 fairness keys, round-robin=10^3 keys on
//	                       a round-robin scope
//	BenchmarkWaiterMemory/waiters=N
//	    B/waiter           heap and goroutine stacks held per queued waiter
//	                       (ns/op is suppressed, it means nothing)
//	    allocs/waiter      allocations made per Enqueue
//	    semaphore-B/waiter the same for a goroutine blocked in semaphore.Acquire
//	    x-semaphore        B/waiter ÷ semaphore-B/waiter
//
// Benchmarks run one after another, so the package-level caches below need no
// lock.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
)

// roomy is a limit no benchmark comes near, so the throughput benchmarks
// never wait.
const roomy = 1 << 40

var benchOwner = admission.Owner{ID: "bench", Gen: 1}

// newBenchEngine returns an engine on the real clock with an observer that
// does nothing: the gateway always has one (metrics), so events are built,
// but no observer's own cost is mixed into the engine's.
func newBenchEngine() *admission.Memory {
	return admission.NewMemory(admission.Options{
		Clock:    clock.Real,
		Observer: admission.ObserverFunc(func(admission.Event) {}),
	})
}

// splitAcross runs ops operations on exactly goroutines goroutines (not a
// multiple of GOMAXPROCS, as b.RunParallel would), each doing its share.
func splitAcross(ops, goroutines int, work func(g, ops int)) {
	var wg sync.WaitGroup
	for g := range goroutines {
		share := ops / goroutines
		if g < ops%goroutines {
			share++
		}
		wg.Go(func() { work(g, share) })
	}
	wg.Wait()
}

// measureNsPerOp times run(n), growing n as the testing package does, until
// one run lasts -test.benchtime (or runs its fixed "Nx" count), and returns
// the time per operation. The baselines use it because testing.Benchmark
// cannot run inside a benchmark: it waits for a lock the running one holds.
func measureNsPerOp(run func(n int)) float64 {
	goal, fixed := time.Second, 0
	if f := flag.Lookup("test.benchtime"); f != nil {
		s := f.Value.String()
		if count, ok := strings.CutSuffix(s, "x"); ok {
			fixed, _ = strconv.Atoi(count)
		} else if d, err := time.ParseDuration(s); err == nil {
			goal = d
		}
	}
	n := max(fixed, 1)
	for {
		runtime.GC()
		start := time.Now()
		run(n)
		took := time.Since(start)
		if fixed > 0 || took >= goal || n >= 1e9 {
			return float64(took.Nanoseconds()) / float64(n)
		}
		next := goal.Nanoseconds() * int64(n) / max(took.Nanoseconds(), 1)
		next += next / 5
		n = int(max(min(next, 100*int64(n)), int64(n)+1))
	}
}

// --- 1. Acquire+release throughput -----------------------------------------

// BenchmarkAcquireRelease measures Acquire then Release of amount 1 in 1 or 3
// scopes (an API key, its group, a platform model), on 1 or 8 goroutines,
// against semaphore.Weighted doing the same: one semaphore per scope,
// acquired in order and released.
func BenchmarkAcquireRelease(b *testing.B) {
	scopeNames := []string{"key:k1", "group:g1", "model:m1"}
	for _, scopes := range []int{1, 3} {
		b.Run(fmt.Sprintf("scopes=%d", scopes), func(b *testing.B) {
			for _, goroutines := range []int{1, 8} {
				b.Run(fmt.Sprintf("goroutines=%d", goroutines), func(b *testing.B) {
					base := semaphoreThroughputBaseline(b, scopes, goroutines)
					ctx := context.Background()
					e := newBenchEngine()
					defer e.Close()
					needs := make([]admission.Need, scopes)
					for i, name := range scopeNames[:scopes] {
						if err := e.SetScope(ctx, name, admission.ScopeConfig{Limit: roomy}); err != nil {
							b.Fatalf("set scope %s: %v", name, err)
						}
						needs[i] = admission.Need{Scope: name, Amount: 1}
					}
					// One request per goroutine, reused for every operation;
					// its ID is unique per goroutine, which holds at most one
					// lease at a time.
					reqs := make([]admission.Request, goroutines)
					for g := range reqs {
						reqs[g] = admission.Request{
							ID:         "g" + strconv.Itoa(g),
							Owner:      benchOwner,
							Candidates: []admission.Candidate{{Needs: needs}},
						}
					}

					b.ResetTimer()
					splitAcross(b.N, goroutines, func(g, ops int) {
						req := &reqs[g]
						for range ops {
							lease, err := e.Acquire(ctx, *req)
							if err != nil {
								b.Errorf("acquire: %v", err)
								return
							}
							if err := e.Release(ctx, lease.ID, benchOwner); err != nil {
								b.Errorf("release: %v", err)
								return
							}
						}
					})
					b.StopTimer()

					ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
					b.ReportMetric(base, "semaphore-ns/op")
					b.ReportMetric(ns/base, "x-semaphore")
				})
			}
		})
	}
}

var semaphoreThroughput = map[[2]int]float64{}

// semaphoreThroughputBaseline measures, once per shape, what
// BenchmarkAcquireRelease does with bare semaphores.
func semaphoreThroughputBaseline(b *testing.B, scopes, goroutines int) float64 {
	key := [2]int{scopes, goroutines}
	if ns, ok := semaphoreThroughput[key]; ok {
		return ns
	}
	ctx := context.Background()
	sems := make([]*semaphore.Weighted, scopes)
	for i := range sems {
		sems[i] = semaphore.NewWeighted(roomy)
	}
	var failed atomic.Bool
	ns := measureNsPerOp(func(n int) {
		splitAcross(n, goroutines, func(_, ops int) {
			for range ops {
				for _, s := range sems {
					if err := s.Acquire(ctx, 1); err != nil {
						failed.Store(true)
						return
					}
				}
				for i := len(sems) - 1; i >= 0; i-- {
					sems[i].Release(1)
				}
			}
		})
	})
	if failed.Load() {
		b.Fatal("semaphore baseline: acquire failed")
	}
	semaphoreThroughput[key] = ns
	return ns
}

// --- 2. Cost per operation with many waiters queued -------------------------

const (
	// queueScope is the one scope the queued benchmarks fill: round-robin,
	// so waiters are ordered by priority, then their key's turn, then arrival.
	queueScope = "model:queued"
	// queueLimit leases hold queueScope full while waiters queue on it.
	queueLimit = 64
	// The queued waiters are spread over queuePriorities priorities and over
	// n / waitersPerKey fairness keys, so the number of classes (key ×
	// priority) grows with the queue and the engine's heaps are exercised.
	queuePriorities = 4
	waitersPerKey   = 16
)

// queueFixture is an engine whose queueScope is full, with waiters queued on
// it. Each step releases one held lease, which admits the next waiter (its
// notify hands the new lease back to held), and enqueues one new waiter, so
// the queue length stays put.
//
// The newcomer of a step has the lowest priority, so it queues behind every
// waiter already there and each step admits the waiter that has the queue's
// turn — an old one, cold in memory when the queue is large. A newcomer of
// random priority would not do: under strict priority the higher ones would
// soon be admitted as they arrive, from a hot cache, and the queue would sit
// untouched beneath them, so a run would measure less the longer the fixture
// had been used.
type queueFixture struct {
	engine *admission.Memory
	// held carries the IDs of the leases held in queueScope: the fill's, then
	// those handed to notify. Its capacity is twice queueLimit, so notify never
	// blocks; it reports an admission past the limit instead.
	held    chan admission.LeaseID
	notify  func(admission.Lease, error)
	failure atomic.Pointer[error]
	closing atomic.Bool

	req  admission.Request // reused for every Enqueue
	keys []string
	rng  *rand.Rand
	seq  int
}

// newQueueFixture returns an engine with queueScope full and nobody queued;
// keys is how many fairness keys later waiters are spread over.
func newQueueFixture(keys int) (*queueFixture, error) {
	ctx := context.Background()
	f := &queueFixture{
		engine: newBenchEngine(),
		held:   make(chan admission.LeaseID, 2*queueLimit),
		keys:   make([]string, max(keys, 1)),
		rng:    rand.New(rand.NewPCG(1, 2)),
	}
	for i := range f.keys {
		f.keys[i] = "tenant-" + strconv.Itoa(i)
	}
	f.notify = func(l admission.Lease, err error) {
		if err != nil {
			if !f.closing.Load() {
				f.fail(fmt.Errorf("waiter %s: %w", l.WaiterID, err))
			}
			return
		}
		select {
		case f.held <- l.ID:
		default:
			f.fail(fmt.Errorf("lease %d admitted with %d leases already held in a scope of limit %d",
				l.ID, len(f.held), queueLimit))
		}
	}
	// One candidate list shared by every waiter, as a gateway would share
	// its routing result: only the engine's own bookkeeping is per waiter.
	candidates := []admission.Candidate{{Needs: []admission.Need{{Scope: queueScope, Amount: 1}}}}
	f.req = admission.Request{Owner: benchOwner, Candidates: candidates}

	cfg := admission.ScopeConfig{Limit: queueLimit, RoundRobin: true}
	if err := f.engine.SetScope(ctx, queueScope, cfg); err != nil {
		f.close()
		return nil, fmt.Errorf("set scope: %w", err)
	}
	for i := range queueLimit {
		fill := admission.Request{ID: "fill-" + strconv.Itoa(i), Owner: benchOwner, Candidates: candidates}
		lease, err := f.engine.TryAcquire(ctx, fill)
		if err != nil {
			f.close()
			return nil, fmt.Errorf("fill lease %d: %w", i, err)
		}
		f.held <- lease.ID
	}
	return f, nil
}

func (f *queueFixture) fail(err error) { f.failure.CompareAndSwap(nil, &err) }

func (f *queueFixture) err() error {
	if p := f.failure.Load(); p != nil {
		return *p
	}
	return nil
}

func (f *queueFixture) close() {
	f.closing.Store(true)
	f.engine.Close()
}

// enqueue queues one waiter of priority prio with a fresh ID and a random
// fairness key.
func (f *queueFixture) enqueue(ctx context.Context, prio int32) error {
	f.seq++
	f.req.ID = "w" + strconv.Itoa(f.seq)
	f.req.FairnessKey = f.keys[f.rng.IntN(len(f.keys))]
	f.req.Priority = prio
	if err := f.engine.Enqueue(ctx, f.req, f.notify); err != nil {
		return fmt.Errorf("enqueue %s: %w", f.req.ID, err)
	}
	return nil
}

// enqueueN queues n waiters of random priorities.
func (f *queueFixture) enqueueN(ctx context.Context, n int) error {
	for range n {
		if err := f.enqueue(ctx, int32(f.rng.IntN(queuePriorities))); err != nil {
			return err
		}
	}
	return f.err()
}

// step releases the oldest held lease and enqueues a waiter of the lowest
// priority.
func (f *queueFixture) step(ctx context.Context) error {
	var id admission.LeaseID
	select {
	case id = <-f.held:
	default:
		// Only an engine that calls notify asynchronously gets here.
		select {
		case id = <-f.held:
		case <-time.After(10 * time.Second):
			if err := f.err(); err != nil {
				return err
			}
			return errors.New("no lease held in the full scope: a release admitted nobody")
		}
	}
	if err := f.engine.Release(ctx, id, benchOwner); err != nil {
		return fmt.Errorf("release %d: %w", id, err)
	}
	return f.enqueue(ctx, 0)
}

// queued caches the fixture of the last size BenchmarkQueuedStep used: the
// 10^6 queue takes seconds to build, so it is built once for every -count.
// Its state after a run is again the steady state a run starts from.
var queued struct {
	n int
	f *queueFixture
}

func queuedFixture(b *testing.B, n int) *queueFixture {
	if queued.f != nil && queued.n == n {
		return queued.f
	}
	dropQueuedFixture()
	f, err := newQueueFixture(n / waitersPerKey)
	if err != nil {
		b.Fatal(err)
	}
	if err := f.enqueueN(context.Background(), n); err != nil {
		f.close()
		b.Fatalf("queue %d waiters: %v", n, err)
	}
	queued.n, queued.f = n, f
	return f
}

func dropQueuedFixture() {
	if queued.f != nil {
		queued.f.close()
		queued.n, queued.f = 0, nil
		runtime.GC()
	}
}

// BenchmarkQueuedStep measures one steady-state step (a release that admits
// the next waiter, plus an Enqueue) with 10^3, 10^5 and 10^6 waiters queued,
// against the same step at 10^3: admission must stay O(log n).
func BenchmarkQueuedStep(b *testing.B) {
	for _, n := range []int{1_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("waiters=%d", n), func(b *testing.B) {
			base := queuedStepBaseline(b)
			f := queuedFixture(b, n)
			ctx := context.Background()
			for b.Loop() {
				if err := f.step(ctx); err != nil {
					b.Fatal(err)
				}
			}
			if err := f.err(); err != nil {
				b.Fatal(err)
			}
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(base, "1k-ns/op")
			b.ReportMetric(ns/base, "x-1k")
		})
	}
}

var queuedStep1k float64

// queuedStepBaseline measures, once, the step of BenchmarkQueuedStep with
// 10^3 waiters queued, on a fixture of its own.
func queuedStepBaseline(b *testing.B) float64 {
	if queuedStep1k != 0 {
		return queuedStep1k
	}
	const n = 1_000
	f, err := newQueueFixture(n / waitersPerKey)
	if err != nil {
		b.Fatalf("baseline at 10^3 waiters: %v", err)
	}
	defer f.close()
	ctx := context.Background()
	if err := f.enqueueN(ctx, n); err != nil {
		b.Fatalf("baseline at 10^3 waiters: %v", err)
	}
	var failure error
	ns := measureNsPerOp(func(ops int) {
		for range ops {
			if failure = f.step(ctx); failure != nil {
				return
			}
		}
	})
	if failure != nil {
		b.Fatalf("baseline at 10^3 waiters: %v", failure)
	}
	queuedStep1k = ns
	return ns
}

// BenchmarkPosition measures Position of the last of 10^5 waiters queued on
// one full scope, with 1% of the queue cancelled on the way (so the waiters'
// bookkeeping is not in its freshly built shape).
func BenchmarkPosition(b *testing.B) {
	const n = 100_000
	for _, shape := range []struct {
		name       string
		keys       int
		roundRobin bool
	}{
		{"one", 1, false},
		{"keys", 1_000, false},
		{"round-robin", 1_000, true},
	} {
		b.Run(shape.name, func(b *testing.B) {
			dropQueuedFixture()
			ctx := context.Background()
			e := newBenchEngine()
			defer e.Close()
			cfg := admission.ScopeConfig{Limit: 1, RoundRobin: shape.roundRobin}
			if err := e.SetScope(ctx, queueScope, cfg); err != nil {
				b.Fatal(err)
			}
			cands := []admission.Candidate{{Needs: []admission.Need{{Scope: queueScope, Amount: 1}}}}
			if _, err := e.TryAcquire(ctx, admission.Request{ID: "fill", Owner: benchOwner, Candidates: cands}); err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			notify := func(admission.Lease, error) {}
			total := n + n/100
			for i := range total {
				req := admission.Request{
					ID:          "w" + strconv.Itoa(i),
					FairnessKey: "tenant-" + strconv.Itoa(rng.IntN(shape.keys)),
					Owner:       benchOwner,
					Candidates:  cands,
				}
				if err := e.Enqueue(ctx, req, notify); err != nil {
					b.Fatal(err)
				}
			}
			for _, i := range rng.Perm(total - 1)[:total-n] {
				if err := e.Cancel(ctx, "w"+strconv.Itoa(i)); err != nil {
					b.Fatal(err)
				}
			}
			last := "w" + strconv.Itoa(total-1)
			var pos admission.Position
			for b.Loop() {
				var err error
				if pos, err = e.Position(ctx, last); err != nil {
					b.Fatal(err)
				}
			}
			if pos.Queued != n || pos.Ahead < n/2 {
				b.Fatalf("Position of the last waiter: %+v; want %d queued and most of them ahead", pos, n)
			}
		})
	}
}

// --- 3. Memory per queued waiter --------------------------------------------

// footprint is what waiters can hold: live heap plus goroutine stacks, so
// that a waiter parked on a goroutine is charged for it.
func footprint() (bytes, mallocs uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc + ms.StackInuse, ms.Mallocs
}

// BenchmarkWaiterMemory measures what 10^5 waiters queued on a full scope
// (the shape of BenchmarkQueuedStep) hold, against as many goroutines
// blocked in semaphore.Acquire. Its timed loop is empty: the figures are
// per waiter, and ns/op is suppressed.
func BenchmarkWaiterMemory(b *testing.B) {
	const n = 100_000
	b.Run(fmt.Sprintf("waiters=%d", n), func(b *testing.B) {
		dropQueuedFixture()
		base := semaphoreWaiterBytes(n)

		// The engine, its scope, its fill leases and the fairness keys
		// exist before the first reading; the waiter IDs are made by
		// enqueue and counted, as the caller's share of a waiter.
		f, err := newQueueFixture(n / waitersPerKey)
		if err != nil {
			b.Fatal(err)
		}
		defer f.close()
		before, mallocsBefore := footprint()
		if err := f.enqueueN(context.Background(), n); err != nil {
			b.Fatalf("queue %d waiters: %v", n, err)
		}
		after, mallocsAfter := footprint()
		runtime.KeepAlive(f)

		perWaiter := (float64(after) - float64(before)) / n
		for b.Loop() {
		}
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(perWaiter, "B/waiter")
		b.ReportMetric(float64(mallocsAfter-mallocsBefore)/n, "allocs/waiter")
		b.ReportMetric(base, "semaphore-B/waiter")
		b.ReportMetric(perWaiter/base, "x-semaphore")
	})
}

var semaphoreWaiterBytesCache = map[int]float64{}

// semaphoreWaiterBytes measures, once, what each of n goroutines blocked in
// Acquire on a full semaphore.Weighted holds.
func semaphoreWaiterBytes(n int) float64 {
	if v, ok := semaphoreWaiterBytesCache[n]; ok {
		return v
	}
	ctx := context.Background()
	sem := semaphore.NewWeighted(queueLimit)
	if !sem.TryAcquire(queueLimit) {
		panic("a fresh semaphore is not empty")
	}
	before, _ := footprint()
	var started, done sync.WaitGroup
	for range n {
		started.Add(1)
		done.Go(func() {
			started.Done()
			if sem.Acquire(ctx, 1) == nil {
				sem.Release(1)
			}
		})
	}
	started.Wait()
	// Every goroutine has started; let the last few reach Acquire. One still
	// short of it would lack only its waiter entry, a few dozen bytes beside
	// its stack.
	for range 100 {
		runtime.Gosched()
	}
	after, _ := footprint()
	sem.Release(queueLimit)
	done.Wait()
	v := (float64(after) - float64(before)) / float64(n)
	semaphoreWaiterBytesCache[n] = v
	return v
}

// BenchmarkReselect measures RemoveScope re-resolving every waiter: n
// waiters of n fairness keys (n classes) wait on a full scope q with a
// fallback p, also full; removing q re-resolves them all onto p, and the
// pump settles the n re-resolved classes in global order. The cost per
// class must not grow with n (it did, as n: the pump looked for the
// earliest unsettled class by scanning them all).
func BenchmarkReselect(b *testing.B) {
	for _, n := range []int{2_000, 32_000} {
		b.Run(fmt.Sprintf("classes=%d", n), func(b *testing.B) {
			ctx := context.Background()
			one := func(scope string) admission.Candidate {
				return admission.Candidate{Needs: []admission.Need{{Scope: scope, Amount: 1}}}
			}
			var total time.Duration
			for b.Loop() {
				b.StopTimer()
				e := newBenchEngine()
				for _, sc := range []string{"p", "q"} {
					if err := e.SetScope(ctx, sc, admission.ScopeConfig{Limit: 1}); err != nil {
						b.Fatal(err)
					}
					if _, err := e.TryAcquire(ctx, admission.Request{ID: "hold-" + sc, Candidates: []admission.Candidate{one(sc)}}); err != nil {
						b.Fatal(err)
					}
				}
				for i := range n {
					req := admission.Request{ID: "w" + strconv.Itoa(i), FairnessKey: "k" + strconv.Itoa(i),
						Candidates: []admission.Candidate{one("q"), one("p")}}
					if err := e.Enqueue(ctx, req, func(admission.Lease, error) {}); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				start := time.Now()
				if err := e.RemoveScope(ctx, "q"); err != nil {
					b.Fatal(err)
				}
				total += time.Since(start)
				b.StopTimer()
				e.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N)/float64(n), "ns/class")
		})
	}
}
