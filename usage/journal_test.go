package usage_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/usage"
)

// t0 is when the fake clocks of these tests start.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func reservation(key string, i int, at time.Time) weir.Reservation {
	return weir.Reservation{RequestID: fmt.Sprintf("req-%06d", i), KeyID: key, Group: "g", Model: "m",
		PlatformModel: "p", Estimate: weir.MoneyScale * weir.Money(i+1), At: at}
}

// journaled counts the reservations left in the store, recovering them:
// call it once the recorder is done with the store.
func journaled(t *testing.T, s *observedStore) int {
	t.Helper()
	n, err := s.DB.SpendRecover(t.Context(), &weir.SpendRecoverParams{Before: t0.Add(1000 * time.Hour), Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A flush writes its reservations before its records, so a request
// whose reservation and record share the flush leaves no reservation;
// one still running keeps its own.
func TestRecorderReservationsBeforeRecords(t *testing.T) {
	t.Parallel()
	s, k := openStore(t)
	r := usage.New(usage.Config{Interval: time.Hour}, usage.Deps{Store: s})
	start(t, r)
	r.Reserve(reservation(k.ID, 1, t0))
	r.Reserve(reservation(k.ID, 2, t0))
	r.Record(weir.Usage{RequestID: "req-000001", KeyID: k.ID, Outcome: "ok", Cost: 7, At: t0.Add(time.Second)})
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if want := []string{"reserve", "insert"}; !slices.Equal(s.writes, want) {
		t.Errorf("writes in the flush: %v, want %v", s.writes, want)
	}
	if n := journaled(t, s); n != 1 {
		t.Errorf("%d reservations left, want 1: the running request's", n)
	}
	list, err := s.UsageList(t.Context(), weir.UsageFilter{})
	if err != nil {
		t.Fatal(err)
	}
	costs := map[string]weir.Money{}
	for _, u := range list {
		costs[u.RequestID] += u.Cost
	}
	if want := map[string]weir.Money{"req-000001": 7, "req-000002": 3 * weir.MoneyScale}; !maps.Equal(costs, want) {
		t.Errorf("costs after recovery %v, want %v", costs, want)
	}
}

// Reservations are written at the interval on the Recorder's clock, and
// a full batch of them at once.
func TestRecorderWritesReservations(t *testing.T) {
	t.Parallel()
	s, k := openStore(t)
	c := clock.NewFake(t0)
	r := usage.New(usage.Config{Interval: time.Second}, usage.Deps{Store: s, Clock: c})
	start(t, r)
	t.Cleanup(func() { r.Stop(context.Background()) })

	r.Reserve(reservation(k.ID, 0, t0))
	c.Advance(time.Second)
	if n := <-s.reserved; n != 1 {
		t.Errorf("the interval's flush wrote %d reservations, want 1", n)
	}
	for i := range usage.BatchMax {
		r.Reserve(reservation(k.ID, 1+i, t0))
	}
	// No time passes: the full batch wakes the flusher.
	if n := <-s.reserved; n != usage.BatchMax {
		t.Errorf("a full batch's flush wrote %d reservations, want %d", n, usage.BatchMax)
	}
}

// Reserve drops beyond MaxPending, and after Stop, and counts what it
// drops.
func TestRecorderReserveDrops(t *testing.T) {
	t.Parallel()
	s, k := openStore(t)
	var dropped atomic.Int64
	r := usage.New(usage.Config{Interval: time.Hour}, usage.Deps{Store: s, Dropped: func(n int) { dropped.Add(int64(n)) }})
	usage.SetMaxPending(r, 3)
	for i := range 5 {
		r.Reserve(reservation(k.ID, i, t0))
	}
	if got := dropped.Load(); got != 2 {
		t.Errorf("dropped %d reservations past the bound of 3, want 2", got)
	}
	start(t, r)
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.Reserve(reservation(k.ID, 9, t0))
	if got := dropped.Load(); got != 3 {
		t.Errorf("dropped %d reservations after Stop, want 3", got)
	}
	if n := journaled(t, s); n != 3 {
		t.Errorf("%d reservations written, want the 3 buffered", n)
	}
}

// With RecoverAfter, every RecoverEvery the flusher counts the
// reservations older than RecoverAfter, a transaction at a time until
// one counts fewer than its limit, and leaves the younger ones.
func TestRecorderRecoversOldReservations(t *testing.T) {
	t.Parallel()
	s, k := openStore(t)
	var old []weir.Reservation
	for i := range 5 {
		old = append(old, reservation(k.ID, i, t0.Add(-2*time.Hour)))
	}
	young := reservation(k.ID, 9, t0.Add(-10*time.Minute))
	if err := s.DB.SpendReserve(t.Context(), append(old, young)); err != nil {
		t.Fatal(err)
	}
	c := clock.NewFake(t0)
	r := usage.New(usage.Config{Interval: time.Hour, RecoverAfter: time.Hour, RecoverEvery: time.Minute},
		usage.Deps{Store: s, Clock: c})
	usage.SetRecoverLimit(r, 2)
	start(t, r)
	t.Cleanup(func() { r.Stop(context.Background()) })

	// round advances the clock a minute and returns what each of the
	// round's recoveries counted.
	round := func() []int {
		c.Advance(time.Minute)
		var counts []int
		for {
			n := <-s.recovered
			counts = append(counts, n)
			if n < 2 {
				return counts
			}
		}
	}
	if got, want := round(), []int{2, 2, 1}; !slices.Equal(got, want) {
		t.Errorf("the first round counted %v, want %v", got, want)
	}
	// The young reservation is an hour old at t0+50m, and older than
	// that (Before is exclusive) at the round of t0+51m.
	for m := 2; m <= 50; m++ {
		if got := round(); !slices.Equal(got, []int{0}) {
			t.Fatalf("the round at t0+%dm counted %v, want nothing", m, got)
		}
	}
	if got := round(); !slices.Equal(got, []int{1}) {
		t.Errorf("the round at t0+51m counted %v, want the reservation made at t0-10m", got)
	}
	list, err := s.UsageList(t.Context(), weir.UsageFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 6 {
		t.Fatalf("%d usage records after recovery, want 6", len(list))
	}
	for _, u := range list {
		if u.Outcome != weir.OutcomeInterrupted || !u.CostEstimated {
			t.Errorf("recovered %+v, want an interrupted request at its estimate", u)
		}
	}
}

// Without RecoverAfter, the flusher keeps no recovery timer; RecoverAll
// counts every reservation made before now on the Recorder's clock.
func TestRecorderRecoverAll(t *testing.T) {
	t.Parallel()
	s, k := openStore(t)
	c := clock.NewFake(t0)
	r := usage.New(usage.Config{Interval: time.Hour}, usage.Deps{Store: s, Clock: c})
	usage.SetRecoverLimit(r, 2)
	var batch []weir.Reservation
	for i := range 5 {
		batch = append(batch, reservation(k.ID, i, t0.Add(-time.Duration(i+1)*time.Second)))
	}
	// One made at now is not before now.
	batch = append(batch, reservation(k.ID, 9, t0))
	if err := s.DB.SpendReserve(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	start(t, r)
	t.Cleanup(func() { r.Stop(context.Background()) })
	if n := c.Pending(); n != 0 {
		t.Errorf("%d timers pending, want none: no recovery's, and no flush's with nothing buffered", n)
	}
	n, err := r.RecoverAll(t.Context())
	if err != nil || n != 5 {
		t.Errorf("RecoverAll = %d, %v; want 5, nil", n, err)
	}
	if n := journaled(t, s); n != 1 {
		t.Errorf("%d reservations left, want the one made at now", n)
	}
}

// Requests reserving and recording from many goroutines while flushes
// run, by the interval and by full batches, leave no reservation once
// all are recorded: a record is never written before its reservation.
func TestRecorderLeavesNoReservationOfARecordedRequest(t *testing.T) {
	t.Parallel()
	s, k := openStore(t)
	c := clock.NewFake(t0)
	r := usage.New(usage.Config{Interval: time.Second}, usage.Deps{Store: s, Clock: c})
	start(t, r)
	const workers, each = 4, 2 * usage.BatchMax
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w * each; i < (w+1)*each; i++ {
				r.Reserve(reservation(k.ID, i, t0))
				r.Record(weir.Usage{RequestID: fmt.Sprintf("req-%06d", i), KeyID: k.ID, Outcome: "ok", At: t0})
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	if !c.AdvanceUntil(done, time.Second, time.Hour, time.Minute) {
		t.Fatal("the requests did not end")
	}
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, s); got != workers*each {
		t.Errorf("stored %d records, want %d", got, workers*each)
	}
	if n := journaled(t, s); n != 0 {
		t.Errorf("%d reservations left of requests all recorded, want none", n)
	}
}
