package storetest

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// overrideStore is what ExerciseOverrides runs against.
type overrideStore = interface {
	weir.OverrideStore
	io.Closer
}

// ExerciseOverrides runs the OverrideStore contract as numbered subtests,
// in parallel, each on a new, empty store from newStore, which it closes
// when the subtest ends. The contract, beyond the comments on
// weir.OverrideStore, is in the package documentation.
func ExerciseOverrides(t *testing.T, newStore func(t *testing.T) interface {
	weir.OverrideStore
	io.Closer
}) {
	t.Helper()
	runSubtests(t, newStore, []subtest[overrideStore]{
		{"01_OverrideSetThenList", testOverrideSetList},
		{"02_OverrideSetReplaces", testOverrideReplace},
		{"03_OverridePauseOnlyExtends", testOverridePauseExtends},
		{"04_OverrideDelete", testOverrideDelete},
		{"05_OverrideInvalidIsRejected", testOverrideInvalid},
		{"06_OverrideCancelledContext", testOverrideCancelled},
	})
}

func drain(pm string, at time.Time) weir.Override {
	return weir.Override{Scope: weir.PlatformModelScope(pm), Kind: weir.OverrideDrain, SetAt: at}
}

func limit(scope string, n int64, at time.Time) weir.Override {
	return weir.Override{Scope: scope, Kind: weir.OverrideLimit, Limit: n, SetAt: at}
}

func pause(pm string, until, at time.Time) weir.Override {
	return weir.Override{Scope: weir.PlatformModelScope(pm), Kind: weir.OverridePause, Until: until, SetAt: at}
}

func mustSet(t *testing.T, s weir.OverrideStore, os ...weir.Override) {
	t.Helper()
	for _, o := range os {
		if err := s.OverrideSet(t.Context(), o); err != nil {
			t.Fatalf("OverrideSet(%s %s): %v", o.Scope, o.Kind, err)
		}
	}
}

func listOverrides(t *testing.T, s weir.OverrideStore) []weir.Override {
	t.Helper()
	got, err := s.OverrideList(t.Context())
	if err != nil {
		t.Fatalf("OverrideList: %v", err)
	}
	return got
}

// checkOverrides compares a listing with the overrides written, in order.
func checkOverrides(t *testing.T, what string, got []weir.Override, want ...weir.Override) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d overrides %+v; want %d %+v", what, len(got), got, len(want), want)
	}
	for i, w := range want {
		w.Until, w.SetAt = stored(w.Until), stored(w.SetAt)
		if got[i] != w {
			t.Errorf("%s [%d]: %+v; want %+v", what, i, got[i], w)
		}
	}
}

func testOverrideSetList(t *testing.T, s overrideStore) {
	checkOverrides(t, "an empty store", listOverrides(t, s))
	// Byte order: '-' (0x2d) sorts before 'b', and "pm:" after "key:"
	// and "group:".
	ds := []weir.Override{
		drain("up/ab", base),
		limit(weir.PlatformModelScope("up/ab"), 3, base.Add(time.Second)),
		pause("up/ab", base.Add(time.Minute), base.Add(2*time.Second)),
		drain("up/a-b", base),
		limit(weir.GroupScope("gold"), 0, base),
		limit(weir.KeyScope("key_1"), 7, base),
	}
	mustSet(t, s, ds...)
	checkOverrides(t, "OverrideList", listOverrides(t, s), ds[4], ds[5], ds[3], ds[0], ds[1], ds[2])
}

func testOverrideReplace(t *testing.T, s overrideStore) {
	scope := weir.GroupScope("gold")
	mustSet(t, s, limit(scope, 3, base), drain("up/m", base))
	mustSet(t, s, limit(scope, 0, base.Add(time.Hour)), drain("up/m", base.Add(time.Hour)))
	checkOverrides(t, "after setting again", listOverrides(t, s),
		limit(scope, 0, base.Add(time.Hour)), drain("up/m", base.Add(time.Hour)))
}

func testOverridePauseExtends(t *testing.T, s overrideStore) {
	mustSet(t, s, pause("up/m", base.Add(time.Minute), base))
	mustSet(t, s, pause("up/m", base.Add(30*time.Second), base.Add(time.Second)))
	mustSet(t, s, pause("up/m", base.Add(time.Minute), base.Add(2*time.Second)))
	checkOverrides(t, "after an earlier and an equal end", listOverrides(t, s), pause("up/m", base.Add(time.Minute), base))
	mustSet(t, s, pause("up/m", base.Add(2*time.Minute), base.Add(3*time.Second)))
	checkOverrides(t, "after a later end", listOverrides(t, s), pause("up/m", base.Add(2*time.Minute), base.Add(3*time.Second)))
}

func testOverrideDelete(t *testing.T, s overrideStore) {
	a, b := weir.PlatformModelScope("up/a"), weir.PlatformModelScope("up/b")
	all := []weir.Override{
		drain("up/a", base), limit(a, 2, base), pause("up/a", base.Add(time.Minute), base),
		drain("up/b", base), limit(b, 2, base), pause("up/b", base.Add(2*time.Minute), base),
		limit(weir.GroupScope("gold"), 1, base),
	}
	mustSet(t, s, all...)
	del := func(p weir.OverrideDeleteParams, want int) {
		t.Helper()
		if n, err := s.OverrideDelete(t.Context(), &p); err != nil || n != want {
			t.Fatalf("OverrideDelete(%+v) = %d, %v; want %d", p, n, err, want)
		}
	}
	del(weir.OverrideDeleteParams{Kind: weir.OverrideDrain, Scope: a}, 1)
	del(weir.OverrideDeleteParams{Kind: weir.OverrideDrain, Scope: a}, 0)
	del(weir.OverrideDeleteParams{Kind: weir.OverrideDrain, Scope: weir.PlatformModelScope("up/none")}, 0)
	// Pauses over by base+1m: only up/a's.
	del(weir.OverrideDeleteParams{Kind: weir.OverridePause, EndedBy: base.Add(time.Minute)}, 1)
	checkOverrides(t, "after deleting one drain and the pause over", listOverrides(t, s),
		all[6], all[1], all[3], all[4], all[5])
	// Every scope's limits.
	del(weir.OverrideDeleteParams{Kind: weir.OverrideLimit}, 3)
	checkOverrides(t, "after deleting the limits", listOverrides(t, s), all[3], all[5])
	if _, err := s.OverrideDelete(t.Context(), &weir.OverrideDeleteParams{Kind: "everything"}); !errors.Is(err, weir.ErrInvalid) {
		t.Errorf("OverrideDelete of an unknown kind: %v; want ErrInvalid", err)
	}
	checkOverrides(t, "after a refused delete", listOverrides(t, s), all[3], all[5])
}

func testOverrideInvalid(t *testing.T, s overrideStore) {
	pm := weir.PlatformModelScope("up/m")
	for _, o := range []weir.Override{
		{Kind: weir.OverrideDrain, SetAt: base},
		{Scope: pm, Kind: "freeze", SetAt: base},
		{Scope: weir.GroupScope("gold"), Kind: weir.OverrideDrain, SetAt: base},
		{Scope: weir.KeyScope("key_1"), Kind: weir.OverridePause, Until: base, SetAt: base},
		{Scope: pm, Kind: weir.OverrideLimit, Limit: -1, SetAt: base},
		{Scope: pm, Kind: weir.OverrideDrain, Limit: 2, SetAt: base},
		{Scope: pm, Kind: weir.OverridePause, SetAt: base},
		{Scope: pm, Kind: weir.OverrideDrain, Until: base, SetAt: base},
		{Scope: pm, Kind: weir.OverrideLimit, Limit: 1},
	} {
		if err := s.OverrideSet(t.Context(), o); !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("OverrideSet(%+v): %v; want ErrInvalid", o, err)
		}
	}
	checkOverrides(t, "after the refusals", listOverrides(t, s))
}

func testOverrideCancelled(t *testing.T, s overrideStore) {
	d := drain("up/m", base)
	mustSet(t, s, d)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.OverrideSet(ctx, limit(weir.GroupScope("gold"), 1, base)); !errors.Is(err, context.Canceled) {
		t.Errorf("OverrideSet with a cancelled context: %v; want context.Canceled", err)
	}
	if _, err := s.OverrideList(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("OverrideList with a cancelled context: %v; want context.Canceled", err)
	}
	if _, err := s.OverrideDelete(ctx, &weir.OverrideDeleteParams{Kind: weir.OverrideDrain}); !errors.Is(err, context.Canceled) {
		t.Errorf("OverrideDelete with a cancelled context: %v; want context.Canceled", err)
	}
	checkOverrides(t, "after cancelled calls", listOverrides(t, s), d)
}
