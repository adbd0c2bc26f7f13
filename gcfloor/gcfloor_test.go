package gcfloor

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	for _, tc := range []struct {
		live, roots, floor int64
		base, want         int
	}{
		{0, 0, 128 * mib, 100, 100},        // no cycle yet: nothing to go by
		{16 * mib, 0, 128 * mib, 100, 700}, // the goal is the floor
		{64 * mib, 0, 128 * mib, 100, 100}, // from half the floor on, the base
		{500 * mib, 0, 128 * mib, 100, 100},
		{60 * mib, 0, 128 * mib, 200, 200}, // never under the process's own
		{1 << 10, 0, 128 * mib, 100, maxPercent},
		// Stacks and globals count in the goal: 16 + (16+16) × 3.5 = 128.
		{16 * mib, 16 * mib, 128 * mib, 100, 350},
		// 10,000 waiting goroutines' stacks: GOGC alone already passes
		// the floor.
		{16 * mib, 100 * mib, 128 * mib, 100, 100},
	} {
		if got := Percent(tc.live, tc.roots, tc.floor, tc.base); got != tc.want {
			t.Errorf("Percent(%d, %d, %d, %d) = %d; want %d", tc.live, tc.roots, tc.floor, tc.base, got, tc.want)
		}
	}
}

// gogc is the collector's GOGC now.
func gogc(t *testing.T) int {
	t.Helper()
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// TestFloorFollowsTheLiveHeap: after each collection the floor sets GOGC
// for the heap it left live — high for a small one, the base for one past
// half the floor — and stop gives the base back. (It changes the
// process's collector, so it runs alone.)
func TestFloorFollowsTheLiveHeap(t *testing.T) {
	const floorBytes = 64 << 20
	applied := make(chan int, 16)
	f := start(floorBytes, func(p int) { applied <- p })
	t.Cleanup(f.stop)
	base := f.base
	<-applied // start's own adjustment
	next := func() int {
		t.Helper()
		runtime.GC()
		select {
		case p := <-applied:
			return p
		case <-time.After(10 * time.Second):
			t.Fatal("no adjustment after a collection")
			return 0
		}
	}

	// The test binary's heap is a few megabytes: far under the floor.
	if p := next(); p <= 2*base || gogc(t) != p {
		t.Fatalf("a small heap: GOGC %d (collector %d); want well over %d", p, gogc(t), base)
	}
	// A live heap past half the floor: the process's own GOGC.
	held := make([]byte, floorBytes*3/4)
	for i := range held {
		held[i] = 1
	}
	if p := next(); p != base || gogc(t) != base {
		t.Fatalf("a heap past half the floor: GOGC %d (collector %d); want %d", p, gogc(t), base)
	}
	runtime.KeepAlive(held)
	if p := next(); p <= 2*base {
		t.Fatalf("the heap small again: GOGC %d; want well over %d", p, base)
	}
	// Goroutines whose stacks weigh about the floor: GOGC alone already
	// sets a goal past it.
	release := make(chan struct{})
	var parked sync.WaitGroup
	for range 4096 {
		parked.Add(1)
		go deepStack(16, &parked, release)
	}
	parked.Wait()
	if p := next(); p != base {
		t.Errorf("stacks of about the floor: GOGC %d; want %d", p, base)
	}
	close(release)
	f.stop()
	if g := gogc(t); g != base {
		t.Errorf("after stop: GOGC %d; want %d", g, base)
	}
	// A cleanup armed before stop runs and changes nothing.
	runtime.GC()
	if g := gogc(t); g != base {
		t.Errorf("a collection after stop: GOGC %d; want %d", g, base)
	}
}

// deepStack parks in a stack of about depth KiB, scanned at each
// collection, until release is closed.
func deepStack(depth int, parked *sync.WaitGroup, release chan struct{}) byte {
	var frame [1000]byte
	frame[depth%len(frame)] = byte(depth)
	if depth > 0 {
		return frame[0] + deepStack(depth-1, parked, release)
	}
	parked.Done()
	<-release
	return frame[0]
}

// TestStartLeavesGOGC: GOGC in the environment, or a floor of 0, leaves
// the collector as it is.
func TestStartLeavesGOGC(t *testing.T) {
	base := gogc(t)
	stop := Start(0, nil)
	runtime.GC()
	if g := gogc(t); g != base {
		t.Errorf("a floor of 0: GOGC %d; want %d", g, base)
	}
	stop()
	t.Setenv("GOGC", "100")
	stop = Start(64<<20, nil)
	defer stop()
	runtime.GC()
	if g := gogc(t); g != base {
		t.Errorf("GOGC set: GOGC %d; want %d", g, base)
	}
}
