package task

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/sqlite"
)

// TestPurgeRemovesTasksPastRetention: the purge removes, over several
// batches, every finished task older than the retention, and keeps the
// recent and unfinished ones.
func TestPurgeRemovesTasksPastRetention(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "weir.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.KeyCreate(ctx, weir.APIKey{ID: "key_1", Hash: "h1", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	eng := admission.NewMemory(admission.Options{})
	t.Cleanup(eng.Close)
	s, err := New(Config{Retention: 7 * 24 * time.Hour, Clock: clock.NewFake(now)}, Deps[*sql.Tx]{Store: db, Engine: eng, Planner: onePlatform{}})
	if err != nil {
		t.Fatal(err)
	}
	s.purgeBatch = 10

	old := s.purgeBatch*2 + 5
	add := func(i int, finished time.Time) string {
		tk := weir.Task{ID: fmt.Sprintf("task_%05d", i), KeyID: "key_1", Kind: "task", Model: "m", Input: []byte(`{}`),
			Status: weir.TaskQueued, Candidate: -1, CreatedAt: now.Add(-30 * 24 * time.Hour)}
		if _, err := db.TaskCreate(ctx, &tk); err != nil {
			t.Fatal(err)
		}
		if !finished.IsZero() {
			done := weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskSucceeded, FinishedAt: finished}
			if ok, err := db.TaskUpdate(ctx, &weir.TaskUpdateParams{ID: tk.ID, Update: done}); !ok || err != nil {
				t.Fatalf("finish %s: %v %v", tk.ID, ok, err)
			}
		}
		return tk.ID
	}
	for i := range old {
		add(i, now.Add(-8*24*time.Hour))
	}
	recent := add(old, now.Add(-6*24*time.Hour))
	queued := add(old+1, time.Time{})

	n, err := s.purge(ctx)
	if err != nil || n != old {
		t.Fatalf("purge = %d, %v; want the %d tasks finished before the retention", n, err, old)
	}
	left, err := db.TaskList(ctx, weir.TaskFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 || left[0].ID != recent || left[1].ID != queued {
		t.Errorf("left after the purge: %d tasks (%v...), want the recent and the queued one", len(left), left[0].ID)
	}
	if n, err := s.purge(ctx); n != 0 || err != nil {
		t.Errorf("a second purge = %d, %v; want 0", n, err)
	}
}

// TestPurgeRemovesExpiredBindings: the purge job removes, over several
// batches, every response binding expired by now, and keeps the others.
func TestPurgeRemovesExpiredBindings(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "weir.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	eng := admission.NewMemory(admission.Options{})
	t.Cleanup(eng.Close)
	s, err := New(Config{Clock: clock.NewFake(now)}, Deps[*sql.Tx]{Store: db, Engine: eng, Planner: onePlatform{}})
	if err != nil {
		t.Fatal(err)
	}
	s.purgeBatch = 10

	bind := func(i int, expires time.Time) string {
		b := weir.ResponseBinding{ResponseID: fmt.Sprintf("resp_%05d", i), Platform: "openai", KeyID: "key_1",
			CreatedAt: expires.Add(-weir.ResponseBindingTTL), ExpiresAt: expires}
		if err := db.ResponseBind(ctx, b); err != nil {
			t.Fatal(err)
		}
		return b.ResponseID
	}
	expired := s.purgeBatch*2 + 5
	for i := range expired {
		bind(i, now.Add(-time.Duration(i)*time.Minute))
	}
	live := bind(expired, now.Add(time.Second))

	if err := (&purgeWorker{s: s}).Work(ctx, nil); err != nil {
		t.Fatalf("the purge job: %v", err)
	}
	long := now.Add(-weir.ResponseBindingTTL) // when every binding was live
	for i := range expired {
		id := fmt.Sprintf("resp_%05d", i)
		if _, err := db.ResponseBindingGet(ctx, &weir.ResponseBindingGetParams{ResponseID: id, Now: long}); err == nil {
			t.Fatalf("%s, expired, is still stored after the purge", id)
		}
	}
	if _, err := db.ResponseBindingGet(ctx, &weir.ResponseBindingGetParams{ResponseID: live, Now: now}); err != nil {
		t.Errorf("the live binding after the purge: %v", err)
	}
	if n, err := s.purgeBindings(ctx); n != 0 || err != nil {
		t.Errorf("a second purge = %d, %v; want 0", n, err)
	}
}
