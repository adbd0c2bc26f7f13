package postgres

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// BenchmarkUsageInsert writes usage in batches, one transaction each, as
// the recorder's flusher does (usage.BatchMax rows, or a tick's partial
// batch), as package sqlite's benchmark of the same name does. ns/row is
// the round trip's time a row, the server's work included; allocs/op are
// a batch's, this process's. Run with:
//
//	go test -run '^$' -bench UsageInsert -benchmem -count 6 ./postgres/
//
// named=true gives every row a group and an end user; journaled=true
// first journals each batch's reservations, which its usage then
// settles.
func BenchmarkUsageInsert(b *testing.B) {
	for _, c := range []struct {
		rows             int
		named, journaled bool
	}{
		{128, false, false}, {50, false, false}, {128, true, false}, {128, false, true},
	} {
		b.Run(fmt.Sprintf("rows=%d/named=%v/journaled=%v", c.rows, c.named, c.journaled), func(b *testing.B) {
			benchUsageInsert(b, openTemp(b), c.rows, c.named, c.journaled)
		})
	}
}

func benchUsageInsert(b *testing.B, db *DB, batchSize int, named, journaled bool) {
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
		b.StopTimer()
		for i := range batch {
			// Request ids as the gateway makes them: a process prefix
			// and a counter.
			u := weir.Usage{
				RequestID: "req_5f3a9c21_" + strconv.Itoa(rows), KeyID: keyIDs[rows%len(keyIDs)],
				Model: "gpt-4o", PlatformModel: "openai-main/gpt-4o", Endpoint: "/v1/chat/completions",
				PromptTokens: 512, CompletionTokens: 128, Waited: 3 * time.Millisecond, Latency: 850 * time.Millisecond,
				Status: 200, Outcome: "ok", Cost: 1_250_000, At: at.Add(time.Duration(rows) * 500 * time.Microsecond),
			}
			if named {
				u.Group, u.EndUser = "team-"+strconv.Itoa(rows%3), "user-"+strconv.Itoa(rows%97)
			}
			batch[i] = u
			reservations[i] = weir.Reservation{RequestID: u.RequestID, KeyID: u.KeyID, Group: u.Group, Model: u.Model,
				PlatformModel: u.PlatformModel, EndUser: u.EndUser, Estimate: 1_000_000, At: u.At}
			rows++
		}
		b.StartTimer()
		if journaled {
			if err := db.SpendReserve(b.Context(), reservations); err != nil {
				b.Fatal(err)
			}
		}
		if err := db.UsageInsert(b.Context(), batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rows), "ns/row")
}
