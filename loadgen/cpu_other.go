//go:build !unix

package loadgen

import "time"

// processCPU is not known here: ProcessStats.CPU stays zero.
func processCPU() time.Duration { return 0 }
