package bench

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// memSample is a target's memory at the end of a measured phase, in KiB:
// the resident set (VmRSS), its anonymous part (RssAnon: the heap,
// stacks and runtime, without the binary's pages mapped from its file)
// and its peak so far (VmHWM) of the processes serving it, summed; or,
// for a target in this process, this process's, which the load
// generator, the mock and every target in it share.
type memSample struct{ rss, anon, hwm int64 }

// memLog is a target's memSamples, a measured phase each.
type memLog struct {
	mu      sync.Mutex
	samples []memSample
}

// sample notes the memory of procs, or of this process if there are
// none; a process whose status cannot be read counts 0.
func (l *memLog) sample(procs []*child) {
	if l == nil {
		return
	}
	var m memSample
	if len(procs) == 0 {
		m = memOf(os.Getpid())
	}
	for _, p := range procs {
		pm := memOf(p.cmd.Process.Pid)
		m.rss, m.anon, m.hwm = m.rss+pm.rss, m.anon+pm.anon, m.hwm+pm.hwm
	}
	l.mu.Lock()
	l.samples = append(l.samples, m)
	l.mu.Unlock()
}

// last is the latest sample; zero if none.
func (l *memLog) last() memSample {
	if l == nil {
		return memSample{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.samples) == 0 {
		return memSample{}
	}
	return l.samples[len(l.samples)-1]
}

// median is the median of each field over the samples; zero if none.
func (l *memLog) median() memSample {
	if l == nil {
		return memSample{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	med := func(f func(memSample) int64) int64 {
		v := make([]int64, len(l.samples))
		for i, s := range l.samples {
			v[i] = f(s)
		}
		slices.Sort(v)
		if n := len(v); n == 0 {
			return 0
		} else if n%2 == 0 {
			return (v[n/2-1] + v[n/2]) / 2
		}
		return v[len(v)/2]
	}
	return memSample{
		rss:  med(func(s memSample) int64 { return s.rss }),
		anon: med(func(s memSample) int64 { return s.anon }),
		hwm:  med(func(s memSample) int64 { return s.hwm }),
	}
}

// memOf is process pid's memory from one read of its /proc status, so
// that its fields agree (the peak is never below the resident set); a
// field that cannot be read counts 0.
func memOf(pid int) memSample {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memSample{}
	}
	var m memSample
	m.rss, _ = statusField(b, pid, "VmRSS")
	m.anon, _ = statusField(b, pid, "RssAnon")
	m.hwm, _ = statusField(b, pid, "VmHWM")
	return m
}

// statusKiB reads a field (VmRSS, VmHWM) of process pid's /proc status,
// in KiB.
func statusKiB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return statusField(b, pid, field)
}

// statusField is a field of status, process pid's /proc status, in KiB.
func statusField(status []byte, pid int, field string) (int64, error) {
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// withMem fills in rows' memory columns from each target's memLog: the
// latest sample (a line printed as its phase ends) or the median over
// them (a table of several rounds), and says which targets run in
// processes of their own.
func (r *overheadRig) withMem(rows map[string]row, latest bool) {
	for _, t := range r.targets {
		row, ok := rows[t.name]
		if !ok {
			continue
		}
		m := t.mem.median()
		if latest {
			m = t.mem.last()
		}
		row.rss, row.anon, row.hwm = float64(m.rss)/1024, float64(m.anon)/1024, float64(m.hwm)/1024
		row.child = len(t.procs) > 0
		rows[t.name] = row
	}
}
