package sqlite

import (
	"fmt"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// BenchmarkKeyByHash is the request path's key lookup.
func BenchmarkKeyByHash(b *testing.B) {
	db := openTemp(b)
	b.Cleanup(func() { db.Close() })
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 1000 {
		if err := db.KeyCreate(b.Context(), weir.APIKey{
			ID: fmt.Sprintf("key-%d", i), Hash: fmt.Sprintf("%064d", i), Models: []string{"gpt-4o"}, CreatedAt: at,
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := db.KeyByHash(b.Context(), fmt.Sprintf("%064d", i%1000)); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

// BenchmarkOverrideList reads a handful of scope overrides, as the
// gateway does each time its scopes are viewed (GET /admin/queues).
func BenchmarkOverrideList(b *testing.B) {
	db := openTemp(b)
	b.Cleanup(func() { db.Close() })
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 4 {
		if err := db.OverrideSet(b.Context(), weir.Override{
			Scope: fmt.Sprintf("platform_model:pm-%d", i), Kind: weir.OverrideLimit, Limit: 10, SetAt: at,
		}); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if os, err := db.OverrideList(b.Context()); err != nil || len(os) != 4 {
			b.Fatal(len(os), err)
		}
	}
}
