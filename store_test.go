package weir_test

import (
	"errors"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// TestParamsValidate: what every store refuses in a method's params is
// refused by the params' Validate, as ErrInvalid, and nothing else is.
func TestParamsValidate(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		what  string
		p     interface{ Validate() error }
		valid bool
	}{
		{"a key revoked at a time", &weir.KeyRevokeParams{ID: "key_1", At: at}, true},
		{"a key revoked at no time", &weir.KeyRevokeParams{ID: "key_1"}, false},
		{"a node revoked at a time", &weir.NodeRevokeParams{ID: "node_1", At: at}, true},
		{"a node revoked at no time", &weir.NodeRevokeParams{ID: "node_1"}, false},
		{"a task deleted at a time", &weir.TaskDeleteParams{ID: "task_1", At: at}, true},
		{"a task deleted at no time", &weir.TaskDeleteParams{ID: "task_1"}, false},
		{"a callback gone at a time", &weir.TaskCallbackGoneParams{ID: "task_1", At: at}, true},
		{"a callback gone at no time", &weir.TaskCallbackGoneParams{ID: "task_1"}, false},
		{"a purge of one", &weir.TaskPurgeParams{FinishedBefore: at, Limit: 1}, true},
		{"a purge without a time", &weir.TaskPurgeParams{Limit: 1}, false},
		{"a purge of none", &weir.TaskPurgeParams{FinishedBefore: at}, false},
		{"a purge of fewer than none", &weir.TaskPurgeParams{FinishedBefore: at, Limit: -1}, false},
		{"a delete of drains", &weir.OverrideDeleteParams{Kind: weir.OverrideDrain}, true},
		{"a delete of no kind", &weir.OverrideDeleteParams{Scope: "pm:up/m"}, false},
		{"a delete of an unknown kind", &weir.OverrideDeleteParams{Kind: "everything"}, false},
	} {
		err := tc.p.Validate()
		if tc.valid && err != nil {
			t.Errorf("%s: %v, want nil", tc.what, err)
		}
		if !tc.valid && !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tc.what, err)
		}
	}
}

// TestRecordsValidate: what every store refuses in a key it creates, a
// usage record it inserts, a reservation it journals, a recovery's
// parameters or a usage listing's filter is refused by their
// Validate, as ErrInvalid, and nothing else is.
func TestRecordsValidate(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	key := func(edit func(*weir.APIKey)) weir.APIKey {
		k := weir.APIKey{ID: "key_1", Hash: "h1", CreatedAt: at}
		edit(&k)
		return k
	}
	usage := func(edit func(*weir.Usage)) weir.Usage {
		u := weir.Usage{RequestID: "req_1", KeyID: "key_1", At: at}
		edit(&u)
		return u
	}
	reservation := func(edit func(*weir.Reservation)) weir.Reservation {
		r := weir.Reservation{RequestID: "req_1", KeyID: "key_1", Estimate: 5, At: at}
		edit(&r)
		return r
	}
	for _, tc := range []struct {
		what  string
		v     interface{ Validate() error }
		valid bool
	}{
		{"a key", key(func(*weir.APIKey) {}), true},
		{"a key with limits", key(func(k *weir.APIKey) { k.Concurrency, k.MaxWait = 2, time.Second }), true},
		{"a key without an id", key(func(k *weir.APIKey) { k.ID = "" }), false},
		{"a key without a hash", key(func(k *weir.APIKey) { k.Hash = "" }), false},
		{"a key without a creation time", key(func(k *weir.APIKey) { k.CreatedAt = time.Time{} }), false},
		{"a key with a negative limit", key(func(k *weir.APIKey) { k.RPM = -1 }), false},
		{"a usage record", usage(func(*weir.Usage) {}), true},
		{"a usage record without a request id", usage(func(u *weir.Usage) { u.RequestID = "" }), false},
		{"a usage record without a key id", usage(func(u *weir.Usage) { u.KeyID = "" }), false},
		{"a usage record without a time", usage(func(u *weir.Usage) { u.At = time.Time{} }), false},
		{"a reservation", reservation(func(*weir.Reservation) {}), true},
		{"a reservation of nothing", reservation(func(r *weir.Reservation) { r.Estimate = 0 }), true},
		{"a reservation without a request id", reservation(func(r *weir.Reservation) { r.RequestID = "" }), false},
		{"a reservation without a key id", reservation(func(r *weir.Reservation) { r.KeyID = "" }), false},
		{"a reservation without a time", reservation(func(r *weir.Reservation) { r.At = time.Time{} }), false},
		{"a reservation of a negative estimate", reservation(func(r *weir.Reservation) { r.Estimate = -1 }), false},
		{"a recovery", &weir.SpendRecoverParams{Before: at, Limit: 1}, true},
		{"a recovery without a time", &weir.SpendRecoverParams{Limit: 1}, false},
		{"a recovery without a limit", &weir.SpendRecoverParams{Before: at}, false},
		{"a usage filter", weir.UsageFilter{KeyID: "key_1", Since: at, Limit: 10}, true},
		{"a usage filter without a limit", weir.UsageFilter{}, true},
		{"a usage filter with a negative limit", weir.UsageFilter{Limit: -1}, false},
	} {
		err := tc.v.Validate()
		if tc.valid && err != nil {
			t.Errorf("%s: %v, want nil", tc.what, err)
		}
		if !tc.valid && !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tc.what, err)
		}
	}
}
