package usage_test

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir/usage"
)

// BenchmarkRecorderHoldsCPU measures how long the flusher keeps a CPU from
// everything else: with one CPU (GOMAXPROCS 1), a probe goroutine sleeps
// 100µs at a time and notes how late it wakes, while the recorder writes a
// second of traffic at 2,000 req/s (2,000 records) to a SQLite file. The
// latest wake-up is about the longest the request path would have waited
// behind a flush on that CPU. Run with:
//
//	go test -run '^$' -bench RecorderHoldsCPU -benchtime 20x ./usage/
func BenchmarkRecorderHoldsCPU(b *testing.B) {
	const (
		records = 2000
		nap     = 100 * time.Microsecond
	)
	s, k := openStore(b)
	// A short interval writes a round's last partial batch soon.
	r := usage.New(usage.Config{Interval: 10 * time.Millisecond}, usage.Deps{Store: s})
	if err := r.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	defer r.Stop(context.Background())

	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var (
		mu    sync.Mutex
		turns []time.Duration
		stop  = make(chan struct{})
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		var mine []time.Duration
		for {
			select {
			case <-stop:
				mu.Lock()
				turns = mine
				mu.Unlock()
				return
			default:
			}
			t0 := time.Now()
			time.Sleep(nap)
			mine = append(mine, time.Since(t0)-nap)
		}
	}()
	n, written := 0, 0
	for b.Loop() {
		record(r, k.ID, n, n+records)
		n += records
		for written < n {
			written += <-s.inserted
		}
	}
	b.StopTimer()
	close(stop)
	<-done
	slices.Sort(turns)
	if len(turns) > 0 {
		b.ReportMetric(float64(turns[len(turns)-1])/float64(time.Millisecond), "max-late-ms")
		b.ReportMetric(float64(turns[len(turns)*99/100])/float64(time.Millisecond), "p99-late-ms")
	}
}
