// Package gcfloor keeps Go's garbage collector from running more often
// than a heap of a given size needs.
//
// The collector starts a cycle each time the heap has grown by GOGC
// percent (100) of what the last one left live. A gateway's live heap is
// small — tens of megabytes — while it allocates tens of megabytes a
// second for the requests passing through, so it collects several times
// a second, and while a cycle marks, a quarter of the CPU is the
// collector's and goroutines that allocate help it: a streamed chunk that
// crosses the process then, through several goroutine hand-offs, waits
// longer. A floor raises GOGC while the live heap is small, so that the
// heap grows to the floor between cycles, and gives it back as the live
// heap grows: once GOGC alone sets a goal past the floor (from half the
// floor on, for a process of few goroutines), GOGC is the process's own
// again. The goal counts goroutine stacks and globals as the runtime
// does, so thousands of waiting requests' stacks do not multiply it.
// The heap stays about the floor or what GOGC alone gives, whichever is
// more; a GOMEMLIMIT still bounds it.
//
// The floor is re-applied after each collection, from the heap it left
// live. An operator who sets GOGC in the environment keeps it: Start then
// does nothing.
package gcfloor

import (
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Default is the floor weir serve and weir node keep unless told
// otherwise: none, the runtime's GOGC alone, so that a gateway's memory
// follows its live heap. A floor is opt-in: it buys fewer collections,
// and a shorter tail for chunks streamed through several goroutine
// hand-offs, for about the floor in resident memory.
const Default = 0

// maxPercent bounds GOGC while the live heap is tiny (a process just
// started), so that one cycle's goal stays within reason.
const maxPercent = 10_000

// Percent is the GOGC that makes the heap goal the floor, or base,
// whichever is more, for a live heap of live bytes and roots bytes of
// goroutine stacks and globals. The runtime's goal is live + (live +
// roots) × GOGC / 100: GOGC scales the roots too, and thousands of
// waiting goroutines' stacks can outweigh the heap many times, so a GOGC
// taken from the heap alone would set a goal far past the floor.
func Percent(live, roots, floor int64, base int) int {
	if live <= 0 || floor <= live {
		return base
	}
	p := (floor - live) * 100 / (live + max(roots, 0))
	return int(max(min(p, maxPercent), int64(base)))
}

// floor is a running floor.
type floor struct {
	bytes int64
	base  int
	// adjusted, if set, hears each GOGC the floor applies (tests).
	adjusted func(int)

	mu      sync.Mutex
	stopped bool
	applied int
	sample  []metrics.Sample
}

// sentinel is the object whose collection says that a cycle has ended.
// It holds a pointer so that it is never one of the tiny allocator's
// shared blocks, which are collected late.
type sentinel struct{ _ *int }

// Start keeps a heap floor of bytes until stop is called, or does nothing
// if bytes is 0 or less or GOGC is set in the environment.
func Start(bytes int64, log *slog.Logger) (stop func()) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if bytes <= 0 {
		return func() {}
	}
	if v, ok := Overridden(); ok {
		log.Info("gc: GOGC is set, no heap floor", "GOGC", v)
		return func() {}
	}
	f := start(bytes, nil)
	log.Debug("gc: heap floor", "bytes", bytes)
	return f.stop
}

// Overridden returns the GOGC the environment sets, if it does: then
// there is no floor.
func Overridden() (string, bool) {
	v := os.Getenv("GOGC")
	return v, v != ""
}

func start(bytes int64, adjusted func(int)) *floor {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	base := int(s[0].Value.Uint64())
	f := &floor{bytes: bytes, base: base, applied: base, adjusted: adjusted,
		sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}}
	f.cycleEnded()
	return f
}

// arm has cycleEnded run once the next collection has found a new
// sentinel unreachable.
func (f *floor) arm() {
	runtime.AddCleanup(&sentinel{}, (*floor).cycleEnded, f)
}

func (f *floor) cycleEnded() {
	p, ok := f.adjust()
	if !ok {
		return
	}
	f.arm()
	// Heard once the next cycle's sentinel is out: a collection from
	// then on ends in another call.
	if f.adjusted != nil {
		f.adjusted(p)
	}
}

// adjust sets GOGC for the live heap the last cycle left, unless the floor
// was stopped; it returns the GOGC in force and whether it did.
func (f *floor) adjust() (int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return 0, false
	}
	metrics.Read(f.sample)
	var v [3]int64 // live heap, stacks scanned, globals
	for i, s := range f.sample {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = int64(s.Value.Uint64())
		}
	}
	p := Percent(v[0], v[1]+v[2], f.bytes, f.base)
	// A change under a twentieth moves the next cycle by as little; it
	// is not worth the runtime's recomputation.
	if d := p - f.applied; d*20 > f.applied || -d*20 > f.applied {
		debug.SetGCPercent(p)
		f.applied = p
	}
	return f.applied, true
}

// stop gives GOGC back as it was. A cleanup already armed runs once more
// and does nothing.
func (f *floor) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.stopped {
		f.stopped = true
		debug.SetGCPercent(f.base)
	}
}
