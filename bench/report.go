package bench

import (
	"fmt"
	"os"
	"sort"
	"strings"
)

// failures lists errors by count, the most frequent first:
// "3 × EOF; 1 × status 502".
func failures(errs map[string]int) string {
	keys := make([]string, 0, len(errs))
	for k := range errs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return errs[keys[i]] > errs[keys[j]] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d × %s", errs[k], k)
	}
	return strings.Join(parts, "; ")
}

// loadAverage is /proc/loadavg's first three fields, or "?" off Linux.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
