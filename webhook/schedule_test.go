package webhook_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weir-gateway/weir/webhook"
)

func TestDefaultScheduleWithoutJitter(t *testing.T) {
	t.Parallel()
	s := webhook.DefaultSchedule
	s.Jitter = 0
	if got := s.MaxAttempts(); got != 12 {
		t.Fatalf("MaxAttempts = %d, want 12", got)
	}
	if d, ok := s.NextDelay(0); d != 0 || !ok {
		t.Fatalf("NextDelay(0) = %v, %v; want 0, true", d, ok)
	}
	want := []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 4 * time.Hour, 8 * time.Hour, 12 * time.Hour, 24 * time.Hour}
	var total time.Duration
	for i, w := range want {
		d, ok := s.NextDelay(i + 1)
		if !ok || d != w {
			t.Fatalf("NextDelay(%d) = %v, %v; want %v, true", i+1, d, ok, w)
		}
		total += d
	}
	if wantTotal := 51*time.Hour + 42*time.Minute + 35*time.Second; total != wantTotal {
		t.Fatalf("schedule spans %v, want %v", total, wantTotal)
	}
	for _, n := range []int{12, 13, 100} {
		if d, ok := s.NextDelay(n); ok || d != 0 {
			t.Fatalf("NextDelay(%d) = %v, %v; want exhausted", n, d, ok)
		}
	}
}

func TestScheduleJitter(t *testing.T) {
	t.Parallel()
	seeded := func() webhook.Schedule {
		s := webhook.DefaultSchedule
		s.Rand = rand.New(rand.NewPCG(1, 2))
		return s
	}
	a, b := seeded(), seeded()
	moved := 0
	for round := 0; round < 50; round++ {
		for i, base := range a.Delays {
			da, oka := a.NextDelay(i + 1)
			db, okb := b.NextDelay(i + 1)
			if !oka || !okb {
				t.Fatalf("NextDelay(%d) exhausted", i+1)
			}
			if da != db {
				t.Fatalf("same seed, attempt %d: %v and %v", i+1, da, db)
			}
			lo, hi := time.Duration(float64(base)*0.9), time.Duration(float64(base)*1.1)
			if da < lo || da > hi {
				t.Fatalf("attempt %d: %v outside [%v, %v]", i+1, da, lo, hi)
			}
			if da != base {
				moved++
			}
		}
	}
	if moved == 0 {
		t.Fatal("jitter never moved a delay")
	}
	// Without a Rand the shared source is used; still within bounds.
	s := webhook.DefaultSchedule
	if d, ok := s.NextDelay(1); !ok || d < 4500*time.Millisecond || d > 5500*time.Millisecond {
		t.Fatalf("NextDelay(1) = %v, %v; want 5s±10%%", d, ok)
	}
}
