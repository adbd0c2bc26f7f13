package loadgen

import (
	"runtime"
	"time"
)

// ProcessStats is what this whole process spent over a measured window:
// the generator's work and, when the target runs in the same process (as
// weir-bench's do), the target's. Differences between runs of the same
// process at the same load are the targets' own costs, and unlike latency
// they hardly move when other programs load the machine.
type ProcessStats struct {
	// CPU is user plus system CPU time (zero where the OS does not say).
	CPU time.Duration
	// MachineCPU is the busy CPU time of the whole machine, this process
	// included (Linux only; zero elsewhere): MachineCPU - CPU is what other
	// programs took, the measure of how disturbed a run was.
	MachineCPU time.Duration
	// Mallocs and AllocBytes count heap allocations; GCs counts completed
	// garbage collections.
	Mallocs, AllocBytes uint64
	GCs                 uint32
}

// Others is how many cores other programs kept busy on average over d:
// (MachineCPU - CPU) / d, or zero where MachineCPU is not known.
func (p ProcessStats) Others(d time.Duration) float64 {
	if p.MachineCPU == 0 || d <= 0 {
		return 0
	}
	return max(0, float64(p.MachineCPU-p.CPU)/float64(d))
}

// Per divides the counts among n requests: CPU per request, allocations
// and bytes per request (GCs as they are).
func (p ProcessStats) Per(n int) (cpu time.Duration, mallocs, bytes float64) {
	if n <= 0 {
		return 0, 0, 0
	}
	return p.CPU / time.Duration(n), float64(p.Mallocs) / float64(n), float64(p.AllocBytes) / float64(n)
}

// processSnapshot reads the process's counters now.
func processSnapshot() ProcessStats {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ProcessStats{CPU: processCPU(), MachineCPU: machineCPU(), Mallocs: ms.Mallocs, AllocBytes: ms.TotalAlloc, GCs: ms.NumGC}
}

// sub returns what was spent between then and p.
func (p ProcessStats) sub(then ProcessStats) ProcessStats {
	return ProcessStats{
		CPU:        p.CPU - then.CPU,
		MachineCPU: p.MachineCPU - then.MachineCPU,
		Mallocs:    p.Mallocs - then.Mallocs,
		AllocBytes: p.AllocBytes - then.AllocBytes,
		GCs:        p.GCs - then.GCs,
	}
}
