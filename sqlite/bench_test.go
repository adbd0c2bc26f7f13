package sqlite

import (
	"fmt"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// BenchmarkUsageInsert writes usage in batches, one transaction each, as
// the gateway's flusher does, into a file database (WAL,
// synchronous=NORMAL), and reports rows/s; ns/op is how long one batch
// keeps the write connection (and its goroutine on a CPU). Run with:
//
//	go test -run '^$' -bench UsageInsert -benchtime 3s ./sqlite/
//
// journaled=true first journals each batch's reservations (a
// transaction of its own, as the flusher writes them) that its usage
// then settles: ns/op is both transactions, the flush of requests under
// a budget.
func BenchmarkUsageInsert(b *testing.B) {
	for _, journaled := range []bool{false, true} {
		for _, batchSize := range []int{32, 128, 500} {
			b.Run(fmt.Sprintf("rows=%d/journaled=%v", batchSize, journaled), func(b *testing.B) {
				benchUsageInsert(b, batchSize, journaled)
			})
		}
	}
}

func benchUsageInsert(b *testing.B, batchSize int, journaled bool) {
	db := openTemp(b)
	b.Cleanup(func() { db.Close() })
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	keyIDs := make([]string, 10)
	for i := range keyIDs {
		keyIDs[i] = fmt.Sprintf("key-%d", i)
		if err := db.KeyCreate(b.Context(), weir.APIKey{ID: keyIDs[i], Hash: fmt.Sprintf("hash-%d", i), CreatedAt: at}); err != nil {
			b.Fatal(err)
		}
	}
	batch := make([]weir.Usage, batchSize)
	reservations := make([]weir.Reservation, batchSize)
	rows := 0
	for b.Loop() {
		for i := range batch {
			reservations[i] = weir.Reservation{RequestID: fmt.Sprintf("req-%09d", rows), KeyID: keyIDs[rows%len(keyIDs)],
				Group: "default", Model: "gpt-4o", PlatformModel: "openai-main/gpt-4o", Estimate: 1_000_000,
				At: at.Add(time.Duration(rows) * 500 * time.Microsecond)}
			batch[i] = weir.Usage{
				RequestID:        fmt.Sprintf("req-%09d", rows),
				KeyID:            keyIDs[rows%len(keyIDs)],
				Model:            "gpt-4o",
				PlatformModel:    "openai-main/gpt-4o",
				Endpoint:         "/v1/chat/completions",
				PromptTokens:     512,
				CompletionTokens: 128,
				Waited:           3 * time.Millisecond,
				Latency:          850 * time.Millisecond,
				Status:           200,
				Outcome:          "ok",
				At:               at.Add(time.Duration(rows) * 500 * time.Microsecond),
			}
			rows++
		}
		if journaled {
			if err := db.SpendReserve(b.Context(), reservations); err != nil {
				b.Fatal(err)
			}
		}
		if err := db.UsageInsert(b.Context(), batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}

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
