package storetest

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// responseStore is what ExerciseResponses runs against.
type responseStore = interface {
	weir.ResponseStore
	io.Closer
}

// ExerciseResponses runs the ResponseStore contract as numbered subtests,
// in parallel, each on a new, empty store from newStore, which it closes
// when the subtest ends.
func ExerciseResponses(t *testing.T, newStore func(t *testing.T) interface {
	weir.ResponseStore
	io.Closer
}) {
	t.Helper()
	runSubtests(t, newStore, []subtest[responseStore]{
		{"01_ResponseBindThenGet", testResponseBindGet},
		{"02_ResponseBindReplaces", testResponseBindReplaces},
		{"03_ResponseBindingExpires", testResponseExpires},
		{"04_ResponseUnbind", testResponseUnbind},
		{"05_ResponseInvalidIsRejected", testResponseInvalid},
		{"06_ResponseBindingsPurge", testResponseBindingsPurge},
	})
}

func binding(id, platform, key string, at time.Time) weir.ResponseBinding {
	return weir.ResponseBinding{ResponseID: id, Platform: platform, KeyID: key, CreatedAt: at, ExpiresAt: at.Add(weir.ResponseBindingTTL)}
}

func mustBind(t *testing.T, s weir.ResponseStore, bs ...weir.ResponseBinding) {
	t.Helper()
	for _, b := range bs {
		if err := s.ResponseBind(t.Context(), b); err != nil {
			t.Fatalf("ResponseBind(%s): %v", b.ResponseID, err)
		}
	}
}

func getBinding(t *testing.T, s weir.ResponseStore, id string, now time.Time) (weir.ResponseBinding, error) {
	t.Helper()
	return s.ResponseBindingGet(t.Context(), &weir.ResponseBindingGetParams{ResponseID: id, Now: now})
}

func checkBinding(t *testing.T, s weir.ResponseStore, want weir.ResponseBinding, now time.Time) {
	t.Helper()
	got, err := getBinding(t, s, want.ResponseID, now)
	if err != nil {
		t.Fatalf("ResponseBindingGet(%s): %v", want.ResponseID, err)
	}
	want.CreatedAt, want.ExpiresAt = stored(want.CreatedAt), stored(want.ExpiresAt)
	if got != want {
		t.Errorf("ResponseBindingGet(%s) = %+v; want %+v", want.ResponseID, got, want)
	}
}

func expectNoBinding(t *testing.T, s weir.ResponseStore, id string, now time.Time) {
	t.Helper()
	if b, err := getBinding(t, s, id, now); !errors.Is(err, weir.ErrNotFound) {
		t.Errorf("ResponseBindingGet(%s) = %+v, %v; want ErrNotFound", id, b, err)
	}
}

func testResponseBindGet(t *testing.T, s responseStore) {
	a := binding("resp_a", "openai", "key_1", base.Add(123456789*time.Nanosecond))
	b := binding("resp_b", "azure", "key_2", base)
	mustBind(t, s, a, b)
	checkBinding(t, s, a, base.Add(time.Hour))
	checkBinding(t, s, b, base.Add(time.Hour))
	expectNoBinding(t, s, "resp_unknown", base)
}

func testResponseBindReplaces(t *testing.T, s responseStore) {
	mustBind(t, s, binding("resp_a", "openai", "key_1", base))
	again := binding("resp_a", "azure", "key_2", base.Add(time.Minute))
	mustBind(t, s, again)
	checkBinding(t, s, again, base.Add(time.Hour))
}

func testResponseExpires(t *testing.T, s responseStore) {
	a := binding("resp_a", "openai", "key_1", base)
	mustBind(t, s, a)
	checkBinding(t, s, a, a.ExpiresAt.Add(-time.Microsecond))
	expectNoBinding(t, s, "resp_a", a.ExpiresAt)
	// Binding another after it expired leaves it (the purge removes it)
	// and is not found the less.
	mustBind(t, s, binding("resp_b", "openai", "key_1", a.ExpiresAt.Add(time.Second)))
	expectNoBinding(t, s, "resp_a", a.ExpiresAt.Add(time.Second))
}

func testResponseUnbind(t *testing.T, s responseStore) {
	mustBind(t, s, binding("resp_a", "openai", "key_1", base), binding("resp_b", "openai", "key_1", base))
	if err := s.ResponseUnbind(t.Context(), "resp_a"); err != nil {
		t.Fatalf("ResponseUnbind: %v", err)
	}
	expectNoBinding(t, s, "resp_a", base)
	checkBinding(t, s, binding("resp_b", "openai", "key_1", base), base)
	if err := s.ResponseUnbind(t.Context(), "resp_a"); err != nil {
		t.Errorf("ResponseUnbind of an unbound id: %v", err)
	}
}

func testResponseInvalid(t *testing.T, s responseStore) {
	for _, b := range []weir.ResponseBinding{
		{Platform: "openai", KeyID: "k", CreatedAt: base, ExpiresAt: base.Add(time.Hour)},
		{ResponseID: "resp_a", KeyID: "k", CreatedAt: base, ExpiresAt: base.Add(time.Hour)},
		{ResponseID: "resp_a", Platform: "openai", CreatedAt: base, ExpiresAt: base.Add(time.Hour)},
		{ResponseID: "resp_a", Platform: "openai", KeyID: "k", ExpiresAt: base.Add(time.Hour)},
		{ResponseID: "resp_a", Platform: "openai", KeyID: "k", CreatedAt: base, ExpiresAt: base},
	} {
		if err := s.ResponseBind(t.Context(), b); !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("ResponseBind(%+v) = %v; want ErrInvalid", b, err)
		}
	}
	expectNoBinding(t, s, "resp_a", base)
}

// testResponseBindingsPurge: the purge removes the bindings expired by
// its time, the earliest first and at most limit at a time, and nothing
// else; it refuses no time and a limit that is not positive.
func testResponseBindingsPurge(t *testing.T, s responseStore) {
	first := binding("resp_1", "openai", "key_1", base)
	second := binding("resp_2", "openai", "key_1", base.Add(time.Hour))
	third := binding("resp_3", "openai", "key_1", base.Add(2*time.Hour))
	live := binding("resp_4", "openai", "key_1", base.Add(3*time.Hour))
	mustBind(t, s, third, live, second, first)
	purge := func(by time.Time, limit int) (int, error) {
		return s.ResponseBindingsPurge(t.Context(), &weir.ResponseBindingsPurgeParams{ExpiredBy: by, Limit: limit})
	}
	if _, err := purge(time.Time{}, 10); !errors.Is(err, weir.ErrInvalid) {
		t.Errorf("ResponseBindingsPurge with no time: %v; want ErrInvalid", err)
	}
	if _, err := purge(third.ExpiresAt, 0); !errors.Is(err, weir.ErrInvalid) {
		t.Errorf("ResponseBindingsPurge with limit 0: %v; want ErrInvalid", err)
	}
	by := third.ExpiresAt // third expired just then: it goes too
	if n, err := purge(by, 2); n != 2 || err != nil {
		t.Fatalf("the first purge = %d, %v; want 2", n, err)
	}
	// Read as of before they expired: only the purge can have removed
	// them.
	expectNoBinding(t, s, first.ResponseID, base)
	expectNoBinding(t, s, second.ResponseID, base)
	checkBinding(t, s, third, base)
	if n, err := purge(by, 2); n != 1 || err != nil {
		t.Fatalf("the second purge = %d, %v; want the 1 left", n, err)
	}
	expectNoBinding(t, s, third.ResponseID, base)
	if n, err := purge(by, 2); n != 0 || err != nil {
		t.Errorf("a third purge = %d, %v; want 0", n, err)
	}
	checkBinding(t, s, live, base)
}
