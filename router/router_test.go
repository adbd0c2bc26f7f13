package router

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/clock"
)

func model(cands ...weir.Candidate) weir.Model {
	return weir.Model{Name: "m", Kind: weir.KindChat, Candidates: cands}
}

func TestOrderByPriority(t *testing.T) {
	t.Parallel()
	r := New(Options{Clock: clock.NewFake(time.Unix(0, 0))})
	got := r.Order(model(
		weir.Candidate{PlatformModel: "low", Priority: 1},
		weir.Candidate{PlatformModel: "high", Priority: 9},
		weir.Candidate{PlatformModel: "mid", Priority: 5},
	))
	if want := []string{"high", "mid", "low"}; !slices.Equal(got, want) {
		t.Fatalf("Order = %v, want %v", got, want)
	}
}

func TestOrderSpreadsByWeight(t *testing.T) {
	t.Parallel()
	r := New(Options{Clock: clock.NewFake(time.Unix(0, 0)), Rand: rand.New(rand.NewPCG(1, 2))})
	m := model(weir.Candidate{PlatformModel: "a", Weight: 3}, weir.Candidate{PlatformModel: "b", Weight: 1})
	first := map[string]int{}
	for range 4000 {
		first[r.Order(m)[0]]++
	}
	// Expect about 3000 a-first; allow wide slack, the point is the ratio.
	if first["a"] < 2700 || first["a"] > 3300 {
		t.Fatalf("a first %d of 4000 times, want about 3000", first["a"])
	}
}

// Order reads the time only where a candidate has a health record, and
// cools down what the time says.
func TestOrderReadsTheTimeForHealthOnly(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Unix(0, 0))
	r := New(Options{Clock: clk, Failures: 1, Cooldown: 10 * time.Second})
	m := model(weir.Candidate{PlatformModel: "a", Priority: 2}, weir.Candidate{PlatformModel: "b", Priority: 1})
	if got := r.Order(m); !slices.Equal(got, []string{"a", "b"}) || clk.Reads() != 0 {
		t.Fatalf("all healthy: Order = %v after %d reads of the time, want [a b] after none", got, clk.Reads())
	}
	r.Failure("a")
	before := clk.Reads()
	if got := r.Order(m); !slices.Equal(got, []string{"b"}) || clk.Reads()-before != 1 {
		t.Fatalf("a cooling: Order = %v after %d reads of the time, want [b] after one", got, clk.Reads()-before)
	}
	clk.Advance(10 * time.Second)
	if got := r.Order(m); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after a's cooldown: Order = %v, want [a b]", got)
	}
}

func TestCooldownAndRecovery(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Unix(0, 0))
	r := New(Options{Clock: clk, Failures: 2, Cooldown: 10 * time.Second})
	m := model(weir.Candidate{PlatformModel: "a", Priority: 2}, weir.Candidate{PlatformModel: "b", Priority: 1})
	if r.Failure("a") {
		t.Fatal("one failure must not cool a candidate down")
	}
	if !r.Failure("a") {
		t.Fatal("two failures must cool a candidate down")
	}
	if got := r.Order(m); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("during cooldown Order = %v, want [b]", got)
	}
	clk.Advance(10 * time.Second)
	if got := r.Order(m); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after cooldown Order = %v, want [a b]", got)
	}
	// The probe fails: straight back into cooldown.
	if !r.Failure("a") {
		t.Fatal("a failed probe must restart the cooldown")
	}
	r.Success("a")
	if got := r.CoolingUntil("a"); !got.IsZero() {
		t.Fatalf("after success cooling until %v", got)
	}
}

func TestAllCoolingOffersSoonest(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Unix(0, 0))
	r := New(Options{Clock: clk, Failures: 1, Cooldown: 10 * time.Second})
	r.Failure("a")
	clk.Advance(time.Second)
	r.Failure("b")
	m := model(weir.Candidate{PlatformModel: "a"}, weir.Candidate{PlatformModel: "b"})
	if got := r.Order(m); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("all cooling: Order = %v, want [a] (ends first)", got)
	}
}
