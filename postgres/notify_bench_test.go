package postgres

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
)

// BenchmarkNotifyTask sends task notices from many callers at once, as a
// fleet's workers ending tasks do (callers rounded up to a multiple of
// GOMAXPROCS). ns/op is a notice's share of the time,
// the server's work included; allocs/op are this process's. Run with:
//
//	go test -run '^$' -bench NotifyTask -benchmem -count 6 ./postgres/
func BenchmarkNotifyTask(b *testing.B) {
	for _, callers := range []int{2, 16, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			db := openTemp(b)
			var seq atomic.Int64
			b.SetParallelism(max(callers/runtime.GOMAXPROCS(0), 1))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := fmt.Sprintf("task_%d", seq.Add(1))
					if err := db.NotifyTask(b.Context(), "ended", id); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
