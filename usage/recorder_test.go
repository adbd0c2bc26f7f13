package usage_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/sqlite"
	"github.com/weir-gateway/weir/usage"
)

// observedStore is a real SQLite store that reports each UsageInsert's
// batch size once it returns, and can hold inserts until released. It
// reports each SpendReserve's batch size and each SpendRecover's count
// too, and notes the order of the writes.
type observedStore struct {
	*sqlite.DB
	inserted  chan int
	entered   chan struct{} // told when an insert begins, if not nil
	gate      chan struct{} // an insert waits for it, if not nil
	reserved  chan int
	recovered chan int

	mu     sync.Mutex
	writes []string // "reserve" and "insert", in the order they began
}

func (s *observedStore) wrote(what string) {
	s.mu.Lock()
	s.writes = append(s.writes, what)
	s.mu.Unlock()
}

func (s *observedStore) SpendReserve(ctx context.Context, batch []weir.Reservation) error {
	s.wrote("reserve")
	err := s.DB.SpendReserve(ctx, batch)
	s.reserved <- len(batch)
	return err
}

func (s *observedStore) SpendRecover(ctx context.Context, p *weir.SpendRecoverParams) (int, error) {
	n, err := s.DB.SpendRecover(ctx, p)
	s.recovered <- n
	return n, err
}

func (s *observedStore) UsageInsert(ctx context.Context, batch []weir.Usage) error {
	s.wrote("insert")
	if s.entered != nil {
		s.entered <- struct{}{}
	}
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
		}
	}
	err := s.DB.UsageInsert(ctx, batch)
	s.inserted <- len(batch)
	return err
}

func openStore(t testing.TB) (*observedStore, weir.APIKey) {
	t.Helper()
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "weir.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	k := weir.APIKey{ID: "key-1", Hash: fmt.Sprintf("%064d", 1), CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	if err := db.KeyCreate(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	return &observedStore{DB: db, inserted: make(chan int, 1<<10), reserved: make(chan int, 1<<10),
		recovered: make(chan int, 1<<10)}, k
}

func record(r *usage.Recorder, key string, from, to int) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := from; i < to; i++ {
		r.Record(weir.Usage{RequestID: fmt.Sprintf("req-%06d", i), KeyID: key, Outcome: "ok",
			At: at.Add(time.Duration(i) * time.Millisecond)})
	}
}

func start(t *testing.T, r *usage.Recorder) {
	t.Helper()
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func stored(t *testing.T, s *observedStore) int {
	t.Helper()
	list, err := s.UsageList(t.Context(), weir.UsageFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// A full batch is written at once, not at the next tick, and no
// transaction carries more than BatchMax rows.
func TestRecorderFlushesFullBatchesWithoutWaitingForTheInterval(t *testing.T) {
	t.Parallel()
	s, k := openStore(t)
	r := usage.New(usage.Config{Interval: time.Hour}, usage.Deps{Store: s})
	start(t, r)
	t.Cleanup(func() { r.Stop(context.Background()) })

	record(r, k.ID, 0, 3*usage.BatchMax)
	for written := 0; written < 3*usage.BatchMax; {
		n := <-s.inserted
		if n > usage.BatchMax {
			t.Errorf("one transaction wrote %d rows, want at most %d", n, usage.BatchMax)
		}
		written += n
	}
	if got := stored(t, s); got != 3*usage.BatchMax {
		t.Errorf("stored %d records, want %d", got, 3*usage.BatchMax)
	}
}

// An idle Recorder keeps no timer; a record arms the flush's, which
// writes it once the interval has passed from it, and none is left after.
func TestRecorderTicksOnlyForWhatIsBuffered(t *testing.T) {
	t.Parallel()
	s, k := openStore(t)
	c := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r := usage.New(usage.Config{Interval: time.Second}, usage.Deps{Store: s, Clock: c})
	start(t, r)
	t.Cleanup(func() { r.Stop(context.Background()) })
	if n := c.Pending(); n != 0 {
		t.Fatalf("%d timers pending while idle, want none", n)
	}
	c.Advance(time.Minute)
	record(r, k.ID, 0, 3)
	record(r, k.ID, 3, 5)
	if n := c.Pending(); n != 1 {
		t.Fatalf("%d timers pending with records buffered, want the flush's", n)
	}
	c.Advance(time.Second)
	if n := <-s.inserted; n != 5 {
		t.Errorf("the tick wrote %d records, want 5", n)
	}
	if n := c.Pending(); n != 0 {
		t.Errorf("%d timers pending after the flush, want none", n)
	}
}

// Stop writes what is pending, in transactions of at most BatchMax rows,
// and later records are dropped and counted.
func TestRecorderStopFlushesThenDrops(t *testing.T) {
	t.Parallel()
	s, k := openStore(t)
	var dropped atomic.Int64
	r := usage.New(usage.Config{Interval: time.Hour}, usage.Deps{Store: s, Dropped: func(n int) { dropped.Add(int64(n)) }})
	start(t, r)
	const n = 2*usage.BatchMax + 7
	record(r, k.ID, 0, n)
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	close(s.inserted)
	for size := range s.inserted {
		if size > usage.BatchMax {
			t.Errorf("one transaction wrote %d rows, want at most %d", size, usage.BatchMax)
		}
	}
	if got := stored(t, s); got != n {
		t.Errorf("stored %d records after Stop, want %d", got, n)
	}
	record(r, k.ID, n, n+3)
	if got := dropped.Load(); got != 3 {
		t.Errorf("dropped %d records recorded after Stop, want 3", got)
	}
}

// When the store falls behind, the buffer stops at MaxPending and the rest
// is counted as dropped; what was buffered is still written.
func TestRecorderDropsBeyondMaxPending(t *testing.T) {
	t.Parallel()
	s, k := openStore(t)
	s.entered, s.gate = make(chan struct{}, 1<<10), make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(s.gate) }) }
	t.Cleanup(release)
	var dropped atomic.Int64
	r := usage.New(usage.Config{Interval: time.Hour}, usage.Deps{Store: s, Dropped: func(n int) { dropped.Add(int64(n)) }})
	const maxPending = 10 * usage.BatchMax // MaxPending would take a while to write under -race
	usage.SetMaxPending(r, maxPending)
	start(t, r)

	// The first full batch goes to the store, which holds it: from then on
	// nothing leaves the buffer.
	record(r, k.ID, 0, usage.BatchMax)
	<-s.entered

	record(r, k.ID, usage.BatchMax, usage.BatchMax+maxPending+10)
	if got := dropped.Load(); got != 10 {
		t.Errorf("dropped %d records, want 10", got)
	}
	release()
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, s); got != usage.BatchMax+maxPending {
		t.Errorf("stored %d records, want %d", got, usage.BatchMax+maxPending)
	}
}

// A Stop whose ctx ends before the flush is done drops what is left,
// counts it, and says why; a second Stop says the same.
func TestRecorderStopGivesUpWhenCtxEnds(t *testing.T) {
	t.Parallel()
	s, k := openStore(t)
	s.entered, s.gate = make(chan struct{}, 1<<10), make(chan struct{})
	var dropped atomic.Int64
	r := usage.New(usage.Config{Interval: time.Hour}, usage.Deps{Store: s, Dropped: func(n int) { dropped.Add(int64(n)) }})
	start(t, r)
	const n = 3 * usage.BatchMax
	record(r, k.ID, 0, n)
	<-s.entered // the first batch is held in the store until Stop gives up
	t.Cleanup(func() { close(s.gate) })
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := r.Stop(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop returned %v, want context.Canceled", err)
	}
	if again := r.Stop(t.Context()); again != err {
		t.Errorf("second Stop returned %v, the first %v", again, err)
	}
	if got, lost := stored(t, s), dropped.Load(); got+int(lost) != n || lost == 0 {
		t.Errorf("stored %d and dropped %d of %d records; want some dropped and none lost uncounted", got, lost, n)
	}
}

// Stopping a Recorder that never started returns at once, counting what
// was buffered as dropped.
func TestRecorderStopWithoutStart(t *testing.T) {
	t.Parallel()
	s, k := openStore(t)
	var dropped atomic.Int64
	r := usage.New(usage.Config{Interval: time.Hour}, usage.Deps{Store: s, Dropped: func(n int) { dropped.Add(int64(n)) }})
	record(r, k.ID, 0, 5)
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := dropped.Load(); got != 5 {
		t.Errorf("dropped %d records, want 5", got)
	}
	if err := r.Start(t.Context()); err == nil {
		t.Error("Start after Stop succeeded")
	}
}
