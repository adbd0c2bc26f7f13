// Package storetest is the contract of weir.Store, as a suite that every
// implementation runs from its own tests:
//
//	func TestStore(t *testing.T) {
//		storetest.Exercise(t, func(t *testing.T) weir.Store {
//			db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "weir.db"))
//			if err != nil {
//				t.Fatal(err)
//			}
//			return db
//		})
//	}
//
// The suite speaks only through weir.Store, so it holds for any home
// (SQLite now, PostgreSQL later). What it checks, beyond the comments on
// weir.Store:
//
// Times come back in UTC, truncated to the microsecond (the precision
// both SQLite text timestamps and PostgreSQL's timestamptz keep).
//
// Keys. KeyCreate rejects a key without an ID, a Hash or a CreatedAt, or
// with negative limits, with an error wrapping weir.ErrInvalid; a second
// key with an ID or a Hash already stored gets weir.ErrConflict and
// changes nothing. KeyByHash and KeyByID return weir.ErrNotFound for
// what is not there; KeyByHash returns revoked keys too, with RevokedAt
// set, so the caller decides (and can answer revoked and unknown keys
// alike). KeyList returns every key ordered by CreatedAt, then ID. An
// empty model allow-list comes back empty. KeyRevoke of an unknown ID is
// weir.ErrNotFound, a zero time is weir.ErrInvalid, and revoking a
// revoked key succeeds and keeps the first RevokedAt.
//
// Usage. UsageInsert writes the whole batch or nothing. A row without a
// RequestID, a KeyID or an At, with a negative Cost, or naming a key that
// does not exist, makes the batch fail with weir.ErrInvalid. A row whose
// RequestID is already stored, or appears earlier in the same batch, is
// skipped: a flush
// retried after an error of unknown outcome does not count a request
// twice, wherever the copies fall in a batch of hundreds of rows (which a
// store may split into several statements). An empty batch is a no-op. UsageList returns records newest
// first (by At; among equal At, the later inserted first), only the
// filter's KeyID if it has one, only At >= Since if Since is set (Since
// truncated to the microsecond like every stored time), and at most Limit
// if Limit is positive (0: no limit, negative: ErrInvalid).
//
// A cancelled context makes a call fail with an error wrapping
// context.Canceled, and a cancelled UsageInsert writes nothing.
//
// Nodes (ExerciseNodes, for stores that are also a weir.NodeStore).
// NodeCreate refuses with weir.ErrInvalid whatever weir.Node.Validate
// refuses, and with weir.ErrConflict a taken ID, Name or Hash, the names
// and hashes of revoked nodes included; either way it stores nothing, and
// of concurrent creates of one name exactly one succeeds. Every field
// comes back from NodeByHash and NodeByID as written (times as for keys).
// Both find revoked nodes, with RevokedAt set; what is not there,
// the empty string included, is weir.ErrNotFound. NodeList returns
// every node, revoked ones included, ordered by Name in byte order (not
// the database's collation), so a listing reads the same on every store.
// NodeRevoke keeps the first RevokedAt when called again and succeeds; an
// unknown ID is weir.ErrNotFound and a zero time weir.ErrInvalid. A
// cancelled context fails a call with context.Canceled and changes
// nothing.
//
// Jobs (ExerciseJobs, for stores that run River's jobs): see
// ExerciseJobs.
//
// Transactions (ExerciseTx, for stores whose transactions carry a task's
// change and its River job together): see ExerciseTx.
//
// Tasks (ExerciseTasks, for stores that are also a weir.TaskStore).
// TaskCreate requires an ID, a KeyID naming a stored key, a Kind, a Model,
// a known Status and a CreatedAt, no negative Attempts and only known
// CallbackEvents (weir.ErrInvalid otherwise); a taken ID is weir.ErrConflict. It ignores
// the Seq it is given and sets a new one, larger than every Seq before it:
// Seq is the submission order. A task whose KeyID already holds its
// IdempotencyKey is not stored: TaskCreate returns created false with the
// stored task, as it is now, copied into its argument, and of concurrent
// submissions with the same key and idempotency key exactly one creates
// the task. An empty IdempotencyKey never matches; another key's do not
// either; TaskByIdempotencyKey finds it (else weir.ErrNotFound). The
// stored task that comes back carries its own Fingerprint,
// so the caller can tell a repeat from another request reusing the key;
// a task stored without one comes back without one. Every field comes
// back from TaskGet as written (times as for keys; an empty Input or
// Result may come back nil); an unknown ID is weir.ErrNotFound. A task
// given to TaskCreate with a DeletedAt is weir.ErrInvalid.
//
// TaskList returns tasks in Seq order (the largest first if Descending),
// never a deleted one, only the filter's KeyID if set, only its Kind if
// set, only those in its Statuses if any, only Seq > AfterSeq and, if
// BeforeSeq is positive, Seq < BeforeSeq, at most Limit if positive (0:
// no limit); a negative Limit or BeforeSeq, or an unknown status, is
// weir.ErrInvalid. Paging by AfterSeq with the last Seq of each page (by
// BeforeSeq, descending) lists every task once (TaskStateList too).
//
// TaskUpdate is a compare-and-set on the status: it applies when the task
// is in one of From and reports true; false with a nil error means it was
// not (it had moved on), and it changed nothing. Status is always set;
// other zero fields (nil pointers, empty strings, a nil or empty Result,
// zero times) are left as they are, and a pointer to zero sets zero. Of
// concurrent updates from the same status exactly one applies. A terminal
// status is never left: an update whose From names one, or that is empty,
// or whose Status or From is unknown, or that sets negative Attempts, is
// weir.ErrInvalid and changes nothing. An unknown ID is weir.ErrNotFound.
//
// TaskDelete sets DeletedAt of a terminal task not yet deleted and
// reports true; of a task not terminal, or already deleted, it reports
// false with a nil error and changes nothing (the first DeletedAt stays).
// Of concurrent deletes of one task exactly one reports true. A deleted
// task still comes back from TaskGet, with DeletedAt set, and from
// TaskCreate under its idempotency key; it is never updated again. An
// unknown ID is weir.ErrNotFound; a zero time is weir.ErrInvalid.
//
// TaskCallbackGone sets CallbackGoneAt of a task whatever its status,
// deleted tasks included, and reports true; a second call reports false
// with a nil error and keeps the first time. Other updates leave it as it
// is. A task given to TaskCreate with a CallbackGoneAt is
// weir.ErrInvalid; an unknown ID is weir.ErrNotFound; a zero time is
// weir.ErrInvalid.
//
// Overrides (ExerciseOverrides, for stores that are also a
// weir.OverrideStore). OverrideSet stores an override as written (times
// as for keys) and replaces the scope's override of the same kind, with
// its Limit, Until and SetAt; a pause is only ever extended: one whose
// Until is not after the stored pause's changes nothing. It refuses with
// weir.ErrInvalid whatever weir.Override.Validate refuses, and stores
// nothing. OverrideList returns every override by Scope in byte order,
// then Kind; none is an empty list. OverrideDelete removes the overrides
// of its Kind, only its Scope's if set, only those whose Until is set and
// not after EndedBy if set, and says how many; removing none is 0 and no
// error; an unknown Kind is weir.ErrInvalid. A cancelled context fails a
// call with context.Canceled and changes nothing.
//
// Budgets (ExerciseBudgets, for stores that are also a weir.BudgetStore).
// BudgetCreate stores a budget with its defaults (mode hard, a rolling
// window anchored at its creation) and times as for keys; it refuses with
// weir.ErrInvalid whatever weir.Budget.ValidateStored refuses, and with
// weir.ErrConflict a taken ID or a second budget of one subject over a
// window of the same length (unit, or period, whatever the zone or
// anchor); either way it stores nothing. BudgetList returns the budgets of
// one subject, or all, by subject type, name in byte order, then ID;
// none is an empty list. BudgetUpdate changes the amount, mode and alerts
// it is given (an empty list of alerts ends them), sets UpdatedAt, and
// returns the budget; with IfUpdatedAt it changes a budget only if its
// UpdatedAt is that time, else weir.ErrConflict. BudgetDelete removes a
// budget and the record of its alerts, so that one made again under its
// ID alerts afresh. BudgetAlertClaim reports true once per budget ID,
// window start (an instant, whatever its zone) and threshold, of any
// number of concurrent claims; any ID may be claimed. A cancelled context
// fails a call with context.Canceled and changes nothing.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// Exercise runs the Store contract as numbered subtests. newStore must
// return a new, empty store each time it is called; Exercise closes it
// when the subtest ends. Subtests run in parallel, each on its own store.
func Exercise(t *testing.T, newStore func(t *testing.T) weir.Store) {
	t.Helper()
	runSubtests(t, newStore, []subtest[weir.Store]{
		{"01_KeyCreateThenGetByHashAndID", testKeyCreateGet},
		{"02_KeyAllowListAndLimitsRoundTrip", testKeyRoundTrip},
		{"03_KeyListByCreation", testKeyList},
		{"04_KeyRevoke", testKeyRevoke},
		{"05_KeyUnknownIsNotFound", testKeyNotFound},
		{"06_KeyDuplicateIsConflict", testKeyConflict},
		{"07_KeyInvalidIsRejected", testKeyInvalid},
		{"08_UsageRoundTrip", testUsageRoundTrip},
		{"09_UsageListNewestFirst", testUsageOrder},
		{"10_UsageListFilters", testUsageFilters},
		{"11_UsageBatchIsAllOrNothing", testUsageAtomic},
		{"12_UsageDuplicateRequestIsSkipped", testUsageDuplicate},
		{"13_CancelledContext", testCancelled},
		{"14_ConcurrentUse", testConcurrent},
		{"15_UsageLargeBatch", testUsageLargeBatch},
		{"16_UsageByKey", testUsageByKey},
	})
}

// subtest is one numbered case of a suite, run on a store of type S.
type subtest[S any] struct {
	name string
	run  func(t *testing.T, s S)
}

// runSubtests runs each case as a parallel subtest on a new store from
// newStore, closed when the subtest ends.
func runSubtests[S io.Closer](t *testing.T, newStore func(t *testing.T) S, cases []subtest[S]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.run(t, s)
		})
	}
}

// base is deliberately not UTC and not on a microsecond, to check that
// stores normalise both.
var base = time.Date(2026, 3, 1, 12, 0, 0, 123_456_789, time.FixedZone("UTC+1", 3600))

// stored is what a store must give back for a time it was given.
func stored(at time.Time) time.Time {
	if at.IsZero() {
		return time.Time{}
	}
	return at.UTC().Truncate(time.Microsecond)
}

func newKey(i int) weir.APIKey {
	return weir.APIKey{
		ID:        fmt.Sprintf("key-%03d", i),
		Name:      fmt.Sprintf("key number %d", i),
		Prefix:    fmt.Sprintf("wk-abc%04d", i),
		Hash:      fmt.Sprintf("%064x", 1000+i),
		Group:     "default",
		CreatedAt: base.Add(time.Duration(i) * time.Minute),
	}
}

func newUsage(i int, keyID string, at time.Time) weir.Usage {
	return weir.Usage{
		RequestID:        fmt.Sprintf("req-%05d", i),
		KeyID:            keyID,
		Model:            "gpt-4o",
		PlatformModel:    "openai-main/gpt-4o",
		Endpoint:         "/v1/chat/completions",
		Group:            fmt.Sprintf("group-%d", i%3),
		PromptTokens:     int64(100 + i),
		CompletionTokens: int64(20 + i),
		CachedTokens:     int64(i % 50),
		Cost:             weir.Money(1_000_000_007 * int64(i+1)),
		CostEstimated:    i%4 == 1,
		Waited:           time.Duration(i) * time.Millisecond,
		Latency:          time.Duration(i)*time.Millisecond + 1234*time.Nanosecond,
		Status:           200,
		Outcome:          "ok",
		At:               at,
	}
}

func mustCreate(t *testing.T, s weir.Store, keys ...weir.APIKey) {
	t.Helper()
	for _, k := range keys {
		if err := s.KeyCreate(t.Context(), k); err != nil {
			t.Fatalf("KeyCreate(%s): %v", k.ID, err)
		}
	}
}

// checkKey compares a key read back with the one written.
func checkKey(t *testing.T, what string, got, written weir.APIKey) {
	t.Helper()
	want := written
	want.CreatedAt = stored(written.CreatedAt)
	want.RevokedAt = stored(written.RevokedAt)
	if len(want.Models) == 0 {
		want.Models = nil
	}
	if len(got.Models) == 0 {
		got.Models = nil
	}
	if got.CreatedAt.Location() != time.UTC || (!got.RevokedAt.IsZero() && got.RevokedAt.Location() != time.UTC) {
		t.Errorf("%s: times not in UTC: created %v, revoked %v", what, got.CreatedAt, got.RevokedAt)
	}
	same := got.ID == want.ID && got.Name == want.Name && got.Prefix == want.Prefix &&
		got.Hash == want.Hash && got.Group == want.Group && slices.Equal(got.Models, want.Models) &&
		got.Limits == want.Limits && got.CreatedAt.Equal(want.CreatedAt) && got.RevokedAt.Equal(want.RevokedAt)
	if !same {
		t.Errorf("%s:\n got  %+v\n want %+v", what, got, want)
	}
}

func checkUsage(t *testing.T, got, written []weir.Usage) {
	t.Helper()
	if len(got) != len(written) {
		t.Fatalf("got %d usage records %v, want %d: %v", len(got), requestIDs(got), len(written), requestIDs(written))
	}
	for i := range got {
		g, w := got[i], written[i]
		if g.At.Location() != time.UTC {
			t.Errorf("record %d: At %v not in UTC", i, g.At)
		}
		if !g.At.Equal(stored(w.At)) {
			t.Errorf("record %d: At %v, want %v", i, g.At, stored(w.At))
		}
		g.At, w.At = time.Time{}, time.Time{}
		if g != w {
			t.Errorf("record %d:\n got  %+v\n want %+v", i, g, w)
		}
	}
}

func requestIDs(us []weir.Usage) []string {
	ids := make([]string, len(us))
	for i, u := range us {
		ids[i] = u.RequestID
	}
	return ids
}

func listUsage(t *testing.T, s weir.Store, f weir.UsageFilter) []weir.Usage {
	t.Helper()
	got, err := s.UsageList(t.Context(), f)
	if err != nil {
		t.Fatalf("UsageList(%+v): %v", f, err)
	}
	return got
}

func testKeyCreateGet(t *testing.T, s weir.Store) {
	k := newKey(1)
	mustCreate(t, s, k)

	got, err := s.KeyByHash(t.Context(), k.Hash)
	if err != nil {
		t.Fatalf("KeyByHash: %v", err)
	}
	checkKey(t, "KeyByHash", got, k)
	if !got.Active() {
		t.Errorf("a new key is not active: RevokedAt %v", got.RevokedAt)
	}

	got, err = s.KeyByID(t.Context(), k.ID)
	if err != nil {
		t.Fatalf("KeyByID: %v", err)
	}
	checkKey(t, "KeyByID", got, k)
}

func testKeyRoundTrip(t *testing.T, s weir.Store) {
	full := newKey(1)
	full.Group = "batch"
	full.Models = []string{"gpt-4o", "text-embedding-3-small", "sora-2"}
	full.Limits = weir.Limits{
		Concurrency:    3,
		RPM:            600,
		TPM:            90_000,
		QueueLimit:     50,
		MaxWait:        2500 * time.Millisecond,
		LeaseTTL:       90 * time.Second,
		FairnessWindow: 1500 * time.Microsecond,
		Shadow:         true,
	}
	empty := newKey(2)
	empty.Models = []string{}
	mustCreate(t, s, full, empty)

	for _, k := range []weir.APIKey{full, empty} {
		got, err := s.KeyByID(t.Context(), k.ID)
		if err != nil {
			t.Fatalf("KeyByID(%s): %v", k.ID, err)
		}
		checkKey(t, "KeyByID "+k.ID, got, k)
		if len(k.Models) == 0 && !got.Allows("anything") {
			t.Errorf("key %s with an empty allow-list does not allow every model", k.ID)
		}
	}
}

func testKeyList(t *testing.T, s weir.Store) {
	got, err := s.KeyList(t.Context())
	if err != nil {
		t.Fatalf("KeyList on an empty store: %v", err)
	}
	if len(got) != 0 {
		t.Fatalf("KeyList on an empty store: %d keys", len(got))
	}

	// Created out of order; k3 and k4 share a CreatedAt, so ID decides.
	k1, k2, k3, k4 := newKey(1), newKey(2), newKey(3), newKey(4)
	k4.CreatedAt = k3.CreatedAt
	mustCreate(t, s, k4, k2, k3, k1)
	if err := s.KeyRevoke(t.Context(), &weir.KeyRevokeParams{ID: k2.ID, At: base.Add(time.Hour)}); err != nil {
		t.Fatalf("KeyRevoke: %v", err)
	}
	k2.RevokedAt = base.Add(time.Hour)

	got, err = s.KeyList(t.Context())
	if err != nil {
		t.Fatalf("KeyList: %v", err)
	}
	want := []weir.APIKey{k1, k2, k3, k4}
	if len(got) != len(want) {
		t.Fatalf("KeyList: %d keys, want %d", len(got), len(want))
	}
	for i := range want {
		checkKey(t, fmt.Sprintf("KeyList[%d]", i), got[i], want[i])
	}
}

func testKeyRevoke(t *testing.T, s weir.Store) {
	k, other := newKey(1), newKey(2)
	mustCreate(t, s, k, other)
	first := base.Add(time.Hour)
	if err := s.KeyRevoke(t.Context(), &weir.KeyRevokeParams{ID: k.ID, At: first}); err != nil {
		t.Fatalf("KeyRevoke: %v", err)
	}
	if err := s.KeyRevoke(t.Context(), &weir.KeyRevokeParams{ID: k.ID, At: first.Add(time.Hour)}); err != nil {
		t.Fatalf("KeyRevoke a second time: %v", err)
	}
	k.RevokedAt = first // the first revocation stands

	got, err := s.KeyByHash(t.Context(), k.Hash)
	if err != nil {
		t.Fatalf("KeyByHash of a revoked key: %v", err)
	}
	checkKey(t, "KeyByHash after revoke", got, k)
	if got.Active() {
		t.Errorf("revoked key is active")
	}
	got, err = s.KeyByID(t.Context(), k.ID)
	if err != nil {
		t.Fatalf("KeyByID of a revoked key: %v", err)
	}
	checkKey(t, "KeyByID after revoke", got, k)

	got, err = s.KeyByID(t.Context(), other.ID)
	if err != nil {
		t.Fatalf("KeyByID: %v", err)
	}
	checkKey(t, "the other key", got, other)

	if err := s.KeyRevoke(t.Context(), &weir.KeyRevokeParams{ID: "key-nope", At: first}); !errors.Is(err, weir.ErrNotFound) {
		t.Errorf("KeyRevoke of an unknown key: %v, want ErrNotFound", err)
	}
	if err := s.KeyRevoke(t.Context(), &weir.KeyRevokeParams{ID: other.ID, At: time.Time{}}); !errors.Is(err, weir.ErrInvalid) {
		t.Errorf("KeyRevoke at the zero time: %v, want ErrInvalid", err)
	}
}

func testKeyNotFound(t *testing.T, s weir.Store) {
	mustCreate(t, s, newKey(1))
	if _, err := s.KeyByHash(t.Context(), fmt.Sprintf("%064x", 99)); !errors.Is(err, weir.ErrNotFound) {
		t.Errorf("KeyByHash of an unknown hash: %v, want ErrNotFound", err)
	}
	if _, err := s.KeyByID(t.Context(), "key-nope"); !errors.Is(err, weir.ErrNotFound) {
		t.Errorf("KeyByID of an unknown id: %v, want ErrNotFound", err)
	}
	if _, err := s.KeyByHash(t.Context(), ""); !errors.Is(err, weir.ErrNotFound) {
		t.Errorf("KeyByHash of the empty hash: %v, want ErrNotFound", err)
	}
}

func testKeyConflict(t *testing.T, s weir.Store) {
	k := newKey(1)
	mustCreate(t, s, k)

	sameID := newKey(2)
	sameID.ID = k.ID
	if err := s.KeyCreate(t.Context(), sameID); !errors.Is(err, weir.ErrConflict) {
		t.Errorf("KeyCreate with a taken id: %v, want ErrConflict", err)
	}
	sameHash := newKey(3)
	sameHash.Hash = k.Hash
	if err := s.KeyCreate(t.Context(), sameHash); !errors.Is(err, weir.ErrConflict) {
		t.Errorf("KeyCreate with a taken hash: %v, want ErrConflict", err)
	}

	list, err := s.KeyList(t.Context())
	if err != nil {
		t.Fatalf("KeyList: %v", err)
	}
	if len(list) != 1 {
		t.Fatalf("after two conflicts KeyList has %d keys, want 1", len(list))
	}
	checkKey(t, "the original key", list[0], k)
	if _, err := s.KeyByID(t.Context(), sameHash.ID); !errors.Is(err, weir.ErrNotFound) {
		t.Errorf("the key with a taken hash was stored after all: %v", err)
	}
}

func testKeyInvalid(t *testing.T, s weir.Store) {
	for _, tc := range []struct {
		name   string
		change func(k *weir.APIKey)
	}{
		{"no id", func(k *weir.APIKey) { k.ID = "" }},
		{"no hash", func(k *weir.APIKey) { k.Hash = "" }},
		{"no creation time", func(k *weir.APIKey) { k.CreatedAt = time.Time{} }},
		{"negative concurrency", func(k *weir.APIKey) { k.Concurrency = -1 }},
		{"negative max wait", func(k *weir.APIKey) { k.MaxWait = -time.Second }},
	} {
		k := newKey(1)
		tc.change(&k)
		if err := s.KeyCreate(t.Context(), k); !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("KeyCreate with %s: %v, want ErrInvalid", tc.name, err)
		}
	}
	list, err := s.KeyList(t.Context())
	if err != nil {
		t.Fatalf("KeyList: %v", err)
	}
	if len(list) != 0 {
		t.Errorf("invalid keys were stored: %+v", list)
	}
}

func testUsageRoundTrip(t *testing.T, s weir.Store) {
	k := newKey(1)
	mustCreate(t, s, k)
	u := newUsage(1, k.ID, base)
	u.Status = 504
	u.Outcome = "queue_timeout"
	u.Waited = 30*time.Second + 7 // nanoseconds survive in durations
	u.Group, u.CachedTokens, u.Cost, u.CostEstimated = "premium", 64, math.MaxInt64, true
	u.Handoff = "stalled node:node_0123456789ab/vllm, stalled node:node_ba9876543210/vllm"
	if err := s.UsageInsert(t.Context(), []weir.Usage{u}); err != nil {
		t.Fatalf("UsageInsert: %v", err)
	}
	checkUsage(t, listUsage(t, s, weir.UsageFilter{}), []weir.Usage{u})

	if err := s.UsageInsert(t.Context(), nil); err != nil {
		t.Errorf("UsageInsert of an empty batch: %v", err)
	}
	checkUsage(t, listUsage(t, s, weir.UsageFilter{}), []weir.Usage{u})
}

func testUsageOrder(t *testing.T, s weir.Store) {
	k := newKey(1)
	mustCreate(t, s, k)
	// Inserted out of time order, over two batches; u3 and u4 share an
	// At, so the later inserted (u4) comes first.
	u1 := newUsage(1, k.ID, base)
	u2 := newUsage(2, k.ID, base.Add(time.Second))
	u3 := newUsage(3, k.ID, base.Add(2*time.Second))
	u4 := newUsage(4, k.ID, base.Add(2*time.Second))
	u5 := newUsage(5, k.ID, base.Add(time.Microsecond)) // one microsecond matters
	if err := s.UsageInsert(t.Context(), []weir.Usage{u3, u1}); err != nil {
		t.Fatalf("UsageInsert: %v", err)
	}
	if err := s.UsageInsert(t.Context(), []weir.Usage{u4, u2, u5}); err != nil {
		t.Fatalf("UsageInsert: %v", err)
	}
	checkUsage(t, listUsage(t, s, weir.UsageFilter{}), []weir.Usage{u4, u3, u2, u5, u1})
}

func testUsageFilters(t *testing.T, s weir.Store) {
	a, b := newKey(1), newKey(2)
	mustCreate(t, s, a, b)
	var batch []weir.Usage
	for i := range 10 {
		key := a.ID
		if i%2 == 1 {
			key = b.ID
		}
		batch = append(batch, newUsage(i, key, base.Add(time.Duration(i)*time.Second)))
	}
	if err := s.UsageInsert(t.Context(), batch); err != nil {
		t.Fatalf("UsageInsert: %v", err)
	}
	newestFirst := func(pick func(u weir.Usage) bool) []weir.Usage {
		var out []weir.Usage
		for i := len(batch) - 1; i >= 0; i-- {
			if pick(batch[i]) {
				out = append(out, batch[i])
			}
		}
		return out
	}
	since := batch[6].At // inclusive
	for _, tc := range []struct {
		name string
		f    weir.UsageFilter
		want []weir.Usage
	}{
		{"all", weir.UsageFilter{}, newestFirst(func(weir.Usage) bool { return true })},
		{"key", weir.UsageFilter{KeyID: b.ID}, newestFirst(func(u weir.Usage) bool { return u.KeyID == b.ID })},
		{"since", weir.UsageFilter{Since: since}, newestFirst(func(u weir.Usage) bool { return !u.At.Before(since) })},
		{"since in another zone", weir.UsageFilter{Since: since.In(time.FixedZone("UTC-7", -7*3600))},
			newestFirst(func(u weir.Usage) bool { return !u.At.Before(since) })},
		{"limit", weir.UsageFilter{Limit: 3}, newestFirst(func(weir.Usage) bool { return true })[:3]},
		{"key, since and limit", weir.UsageFilter{KeyID: a.ID, Since: batch[2].At, Limit: 2},
			[]weir.Usage{batch[8], batch[6]}},
		{"unknown key", weir.UsageFilter{KeyID: "key-nope"}, nil},
		{"since after everything", weir.UsageFilter{Since: base.Add(time.Hour)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkUsage(t, listUsage(t, s, tc.f), tc.want)
		})
	}
	if _, err := s.UsageList(t.Context(), weir.UsageFilter{Limit: -1}); !errors.Is(err, weir.ErrInvalid) {
		t.Errorf("UsageList with a negative limit: %v, want ErrInvalid", err)
	}
}

func testUsageAtomic(t *testing.T, s weir.Store) {
	k := newKey(1)
	mustCreate(t, s, k)
	kept := newUsage(0, k.ID, base)
	if err := s.UsageInsert(t.Context(), []weir.Usage{kept}); err != nil {
		t.Fatalf("UsageInsert: %v", err)
	}
	for _, tc := range []struct {
		name string
		bad  func(u *weir.Usage)
	}{
		// The bad row comes last, after rows that would have been written.
		{"a row naming an unknown key", func(u *weir.Usage) { u.KeyID = "key-nope" }},
		{"a row without a request id", func(u *weir.Usage) { u.RequestID = "" }},
		{"a row without a key id", func(u *weir.Usage) { u.KeyID = "" }},
		{"a row without a time", func(u *weir.Usage) { u.At = time.Time{} }},
		{"a row with a negative cost", func(u *weir.Usage) { u.Cost = -1 }},
	} {
		batch := []weir.Usage{
			newUsage(1, k.ID, base.Add(time.Second)),
			newUsage(2, k.ID, base.Add(2*time.Second)),
			newUsage(3, k.ID, base.Add(3*time.Second)),
		}
		tc.bad(&batch[2])
		if err := s.UsageInsert(t.Context(), batch); !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("UsageInsert with %s: %v, want ErrInvalid", tc.name, err)
		}
		checkUsage(t, listUsage(t, s, weir.UsageFilter{}), []weir.Usage{kept})
	}
}

func testUsageDuplicate(t *testing.T, s weir.Store) {
	k := newKey(1)
	mustCreate(t, s, k)
	u1, u2, u3 := newUsage(1, k.ID, base), newUsage(2, k.ID, base.Add(time.Second)), newUsage(3, k.ID, base.Add(2*time.Second))
	if err := s.UsageInsert(t.Context(), []weir.Usage{u1, u2}); err != nil {
		t.Fatalf("UsageInsert: %v", err)
	}
	// A retried flush: u1 and u2 again, u3 new, and u3 twice in the batch
	// with different contents (the first one is kept).
	again := u2
	again.Outcome = "upstream_error"
	u3b := u3
	u3b.Status = 500
	if err := s.UsageInsert(t.Context(), []weir.Usage{u1, again, u3, u3b}); err != nil {
		t.Fatalf("UsageInsert of a retried batch: %v", err)
	}
	checkUsage(t, listUsage(t, s, weir.UsageFilter{}), []weir.Usage{u3, u2, u1})
}

// testUsageLargeBatch writes batches of a flush's size, which a store may
// split into several statements: every row lands once, duplicates are
// skipped wherever they fall in the batch, and a bad row far into the batch
// still leaves nothing written.
func testUsageLargeBatch(t *testing.T, s weir.Store) {
	k := newKey(1)
	mustCreate(t, s, k)
	const n = 203 // not a round number: a partial last part
	var first []weir.Usage
	for i := range n {
		first = append(first, newUsage(i, k.ID, base.Add(time.Duration(i)*time.Millisecond)))
	}
	// A retry of the first batch's second half, with copies of early rows
	// and of its own rows scattered through it, then new rows.
	var second []weir.Usage
	for i := n / 2; i < 2*n; i++ {
		u := newUsage(i, k.ID, base.Add(time.Duration(i)*time.Millisecond))
		second = append(second, u)
		if i%37 == 0 {
			dup := u
			dup.Status = 500
			second = append(second, dup, first[i%n/3])
		}
	}
	if err := s.UsageInsert(t.Context(), first); err != nil {
		t.Fatalf("UsageInsert of %d rows: %v", len(first), err)
	}
	if err := s.UsageInsert(t.Context(), second); err != nil {
		t.Fatalf("UsageInsert of a retried batch of %d rows: %v", len(second), err)
	}
	var want []weir.Usage
	for i := 2*n - 1; i >= 0; i-- {
		want = append(want, newUsage(i, k.ID, base.Add(time.Duration(i)*time.Millisecond)))
	}
	checkUsage(t, listUsage(t, s, weir.UsageFilter{}), want)

	var bad []weir.Usage
	for i := 2 * n; i < 3*n; i++ {
		bad = append(bad, newUsage(i, k.ID, base.Add(time.Duration(i)*time.Millisecond)))
	}
	bad[len(bad)-40].KeyID = "key-nope"
	if err := s.UsageInsert(t.Context(), bad); !errors.Is(err, weir.ErrInvalid) {
		t.Errorf("UsageInsert with a row naming an unknown key far into the batch: %v, want ErrInvalid", err)
	}
	checkUsage(t, listUsage(t, s, weir.UsageFilter{}), want)
}

func testCancelled(t *testing.T, s weir.Store) {
	k := newKey(1)
	mustCreate(t, s, k)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.UsageInsert(ctx, []weir.Usage{newUsage(1, k.ID, base)}); !errors.Is(err, context.Canceled) {
		t.Errorf("UsageInsert with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := s.KeyByHash(ctx, k.Hash); !errors.Is(err, context.Canceled) {
		t.Errorf("KeyByHash with a cancelled context: %v, want context.Canceled", err)
	}
	if err := s.KeyCreate(ctx, newKey(2)); !errors.Is(err, context.Canceled) {
		t.Errorf("KeyCreate with a cancelled context: %v, want context.Canceled", err)
	}
	checkUsage(t, listUsage(t, s, weir.UsageFilter{}), nil)
	if _, err := s.KeyByID(t.Context(), newKey(2).ID); !errors.Is(err, weir.ErrNotFound) {
		t.Errorf("KeyCreate with a cancelled context stored the key: %v", err)
	}
}

// testConcurrent writes usage batches and reads keys from several
// goroutines at once, as the gateway does: a store must serialise or
// retry its own writes rather than surface "database is locked".
func testConcurrent(t *testing.T, s weir.Store) {
	k := newKey(1)
	mustCreate(t, s, k)
	const workers, batches, rows = 4, 5, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*batches*2)
	for w := range workers {
		wg.Go(func() {
			for b := range batches {
				batch := make([]weir.Usage, rows)
				for r := range batch {
					i := (w*batches+b)*rows + r
					batch[r] = newUsage(i, k.ID, base.Add(time.Duration(i)*time.Millisecond))
				}
				if err := s.UsageInsert(t.Context(), batch); err != nil {
					errs <- fmt.Errorf("worker %d batch %d: UsageInsert: %w", w, b, err)
				}
				if _, err := s.KeyByHash(t.Context(), k.Hash); err != nil {
					errs <- fmt.Errorf("worker %d batch %d: KeyByHash: %w", w, b, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := listUsage(t, s, weir.UsageFilter{}); len(got) != workers*batches*rows {
		t.Errorf("%d usage records after concurrent inserts, want %d", len(got), workers*batches*rows)
	}
}

// testUsageByKey: usage since a time, summed per key in key order: its
// requests, those not ok, its tokens and its last request.
func testUsageByKey(t *testing.T, s weir.Store) {
	a, b, c := newKey(1), newKey(2), newKey(3)
	mustCreate(t, s, a, b, c)
	var batch []weir.Usage
	for i := range 9 {
		u := newUsage(i, []string{a.ID, b.ID, c.ID}[i%3], base.Add(time.Duration(i)*time.Second))
		if i == 4 {
			u.Outcome, u.Status = "upstream_error", 502
		}
		batch = append(batch, u)
	}
	if err := s.UsageInsert(t.Context(), batch); err != nil {
		t.Fatalf("UsageInsert: %v", err)
	}
	// Since the fourth record: a has 3 and 6, b 4 (failed) and 7, c 5 and 8.
	got, err := s.UsageByKey(t.Context(), batch[3].At)
	if err != nil {
		t.Fatal(err)
	}
	tokens := func(is ...int) (n int64) {
		for _, i := range is {
			n += batch[i].PromptTokens + batch[i].CompletionTokens
		}
		return n
	}
	want := []weir.KeyUsage{
		{KeyID: a.ID, Requests: 2, Tokens: tokens(3, 6), Last: stored(batch[6].At)},
		{KeyID: b.ID, Requests: 2, Failed: 1, Tokens: tokens(4, 7), Last: stored(batch[7].At)},
		{KeyID: c.ID, Requests: 2, Tokens: tokens(5, 8), Last: stored(batch[8].At)},
	}
	if len(got) != len(want) {
		t.Fatalf("UsageByKey = %+v, want %+v", got, want)
	}
	for i := range want {
		if g, w := got[i], want[i]; g.KeyID != w.KeyID || g.Requests != w.Requests || g.Failed != w.Failed || g.Tokens != w.Tokens || !g.Last.Equal(w.Last) {
			t.Errorf("UsageByKey[%d] = %+v, want %+v", i, g, w)
		}
	}
	if got, err := s.UsageByKey(t.Context(), base.Add(time.Hour)); err != nil || len(got) != 0 {
		t.Errorf("UsageByKey after everything = %+v, %v; want none", got, err)
	}
}
