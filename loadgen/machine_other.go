//go:build !linux

package loadgen

import "time"

// machineCPU is not known here: ProcessStats.MachineCPU stays zero.
func machineCPU() time.Duration { return 0 }
