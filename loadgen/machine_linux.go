package loadgen

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// machineCPU is the busy CPU time of every process on the machine since
// boot, from /proc/stat (user, nice, system, irq, softirq and steal), or
// zero if it cannot be read.
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 9 || string(f[0]) != "cpu" {
		return 0
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system irq softirq steal
		n, err := strconv.ParseInt(string(f[i]), 10, 64)
		if err != nil {
			return 0
		}
		ticks += n
	}
	// The kernel reports USER_HZ ticks, 100 a second on every Linux ABI
	// that Go supports.
	return time.Duration(ticks) * (time.Second / 100)
}
