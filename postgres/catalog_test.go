package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/fleet"
	"github.com/weir-gateway/weir/pgtest"
)

// nextVersion waits for the catalog listener's next call.
func nextVersion(t *testing.T, ch <-chan int64, what string) int64 {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(guard):
		t.Fatalf("no %s within %v", what, guard)
		return 0
	}
}

// TestCatalogPublishAndTake: the first publication into an empty fleet
// is version 1, and a start's (OnlyFirst) finds it and changes nothing;
// the same hash publishes nothing; another publishes version 2, forgets
// the run-time limits (a drain stays) and is heard by a listener on
// another DB of the schema.
func TestCatalogPublishAndTake(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	dsn := pgtest.Schema(t)
	db, other := open(t, dsn), open(t, dsn)
	ctx := t.Context()

	if _, err := db.CatalogCurrent(ctx); !errors.Is(err, weir.ErrNotFound) {
		t.Fatalf("current of an empty fleet: %v; want ErrNotFound", err)
	}
	heard := make(chan int64, 16)
	follow(t, func(ctx context.Context) error {
		return other.ListenCatalog(ctx, func(v int64) { heard <- v })
	})
	if v := nextVersion(t, heard, "first catalog call"); v != 0 {
		t.Fatalf("first catalog call %d; want 0, read the newest", v)
	}

	first := &weir.CatalogPublishParams{Hash: "h1", Document: []byte("models: []\n"), By: "r0", OnlyFirst: true}
	v, published, err := db.CatalogPublish(ctx, first)
	if err != nil || !published || v.Version != 1 || v.Hash != "h1" || v.PublishedBy != "r0" || v.PublishedAt.IsZero() {
		t.Fatalf("first publication: %+v, %v, %v; want version 1 of h1 by r0", v, published, err)
	}
	if got := nextVersion(t, heard, "version 1's notice"); got != 1 {
		t.Fatalf("heard %d; want 1", got)
	}
	late := &weir.CatalogPublishParams{Hash: "h-other", Document: []byte("groups: []\n"), By: "r1", OnlyFirst: true}
	if v, published, err := db.CatalogPublish(ctx, late); err != nil || published || v.Version != 1 || v.Hash != "h1" {
		t.Fatalf("a later start's publication: %+v, %v, %v; want version 1 kept", v, published, err)
	}
	same := &weir.CatalogPublishParams{Hash: "h1", Document: []byte("models: []\n"), By: "r1"}
	if v, published, err := db.CatalogPublish(ctx, same); err != nil || published || v.Version != 1 {
		t.Fatalf("the same catalog again: %+v, %v, %v; want version 1 kept", v, published, err)
	}

	now := time.Now()
	for _, o := range []weir.Override{
		{Scope: weir.PlatformModelScope("up/chat"), Kind: weir.OverrideLimit, Limit: 1, SetAt: now},
		{Scope: weir.PlatformModelScope("up/chat"), Kind: weir.OverrideDrain, SetAt: now},
	} {
		if err := db.OverrideSet(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	next := &weir.CatalogPublishParams{Hash: "h2", Document: []byte("groups: []\n"), By: "weir apply", ForgetLimits: true}
	v, published, err = db.CatalogPublish(ctx, next)
	if err != nil || !published || v.Version != 2 {
		t.Fatalf("a new catalog: %+v, %v, %v; want version 2", v, published, err)
	}
	if got := nextVersion(t, heard, "version 2's notice"); got != 2 {
		t.Fatalf("heard %d; want 2", got)
	}
	cur, err := other.CatalogCurrent(ctx)
	if err != nil || cur.Version != 2 || string(cur.Document) != "groups: []\n" || cur.PublishedBy != "weir apply" {
		t.Fatalf("current: %+v, %v; want version 2", cur, err)
	}
	os, err := db.OverrideList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(os) != 1 || os[0].Kind != weir.OverrideDrain {
		t.Errorf("overrides after the publication: %+v; want the drain alone", os)
	}
	if _, _, err := db.CatalogPublish(ctx, &weir.CatalogPublishParams{Hash: "h3", By: "x"}); !errors.Is(err, weir.ErrInvalid) {
		t.Errorf("a publication without a document: %v; want ErrInvalid", err)
	}
}

// TestCatalogPublishersTakeTurns: publishers at once each get a version
// of their own, numbered without a gap.
func TestCatalogPublishersTakeTurns(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	db := openTemp(t)
	const n = 8
	got := make(map[int64]bool)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, published, err := db.CatalogPublish(t.Context(), &weir.CatalogPublishParams{
				Hash: fmt.Sprintf("h%d", i), Document: []byte("{}\n"), By: "r"})
			if err != nil || !published {
				t.Errorf("publisher %d: %v, %v", i, published, err)
				return
			}
			mu.Lock()
			got[v.Version] = true
			mu.Unlock()
		}()
	}
	wg.Wait()
	for v := int64(1); v <= n; v++ {
		if !got[v] {
			t.Errorf("no publisher got version %d: %v", v, got)
		}
	}
}

// TestCatalogVersionsPruned: a publication keeps the newest
// weir.CatalogKept versions and any a registered replica serves, and
// removes the others; a replica not registered cannot report one, and
// one registered that reported none is read as serving 0.
func TestCatalogVersionsPruned(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	db := open(t, pgtest.Schema(t))
	ctx := t.Context()
	if _, err := db.ReplicaRegister(ctx, &fleet.ReplicaRegisterParams{ID: "r1", Addr: "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	if err := db.CatalogServing(ctx, "nobody", 1); !errors.Is(err, weir.ErrNotFound) {
		t.Errorf("a version reported by no registered replica: %v; want ErrNotFound", err)
	}
	publish := func(i int) {
		t.Helper()
		p := &weir.CatalogPublishParams{Hash: fmt.Sprintf("h%d", i), Document: []byte("models: []\n"), By: "test"}
		if v, published, err := db.CatalogPublish(ctx, p); err != nil || !published || v.Version != int64(i) {
			t.Fatalf("publication %d: %+v, %v, %v", i, v, published, err)
		}
	}
	for i := 1; i <= 3; i++ {
		publish(i)
	}
	if err := db.CatalogServing(ctx, "r1", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ReplicaRegister(ctx, &fleet.ReplicaRegisterParams{ID: "r2", Addr: "127.0.0.1:2"}); err != nil {
		t.Fatal(err)
	}
	if served, err := db.CatalogServed(ctx); err != nil || !maps.Equal(served, map[string]int64{"r1": 2, "r2": 0}) {
		t.Errorf("served %v, %v; want r1's version 2, and none recorded by r2", served, err)
	}
	last := weir.CatalogKept + 5
	for i := 4; i <= last; i++ {
		publish(i)
	}
	rows, err := db.pool.Query(ctx, `SELECT version FROM catalog_versions ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{2}
	for v := last - weir.CatalogKept + 1; v <= last; v++ {
		want = append(want, int64(v))
	}
	if !slices.Equal(got, want) {
		t.Errorf("versions kept %v; want %v: the newest %d and r1's", got, want, weir.CatalogKept)
	}
}

// TestReplicaRegisterRecordsCatalogVersion: a registration records the
// catalog version its replica serves in the same step, so a replica is
// never registered as serving none while it serves one; a registration
// that supersedes its id's older one keeps the greater version (the
// new process may have recorded a newer one on the older row before its
// registration landed), and one that is refused changes nothing.
func TestReplicaRegisterRecordsCatalogVersion(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	db := open(t, pgtest.Schema(t))
	ctx := t.Context()
	served := func(want map[string]int64, what string) {
		t.Helper()
		if got, err := db.CatalogServed(ctx); err != nil || !maps.Equal(got, want) {
			t.Errorf("%s: served %v, %v; want %v", what, got, err, want)
		}
	}
	if _, err := db.ReplicaRegister(ctx, &fleet.ReplicaRegisterParams{ID: "r1", Addr: "127.0.0.1:1", CatalogVersion: 3}); err != nil {
		t.Fatal(err)
	}
	served(map[string]int64{"r1": 3}, "registered serving version 3")
	if err := db.CatalogServing(ctx, "r1", 5); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ReplicaRegister(ctx, &fleet.ReplicaRegisterParams{ID: "r1", Addr: "127.0.0.1:1", CatalogVersion: 4}); err != nil {
		t.Fatal(err)
	}
	served(map[string]int64{"r1": 5}, "registered again with version 4 after 5 was recorded")
	if _, err := db.ReplicaRegister(ctx, &fleet.ReplicaRegisterParams{ID: "r1", Addr: "127.0.0.1:1", CatalogVersion: 6}); err != nil {
		t.Fatal(err)
	}
	served(map[string]int64{"r1": 6}, "registered again with version 6")
	if _, err := db.ReplicaRegister(ctx, &fleet.ReplicaRegisterParams{ID: "r2", Addr: "127.0.0.1:2", CatalogVersion: -1}); !errors.Is(err, weir.ErrInvalid) {
		t.Errorf("a registration with version -1: %v; want ErrInvalid", err)
	}
	served(map[string]int64{"r1": 6}, "after a registration refused")
}
