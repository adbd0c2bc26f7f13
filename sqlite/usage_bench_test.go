package sqlite

import (
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// BenchmarkUsageInsert writes usage in batches, one transaction each, as
// the recorder's flusher does (usage.BatchMax rows, or a tick's partial
// batch), into a file database (WAL, synchronous=NORMAL). ns/row is how
// long a row keeps the write connection (and its goroutine on a CPU);
// cpu-ns/row is the process's CPU time (user and system, the collector's
// too) while rows are written, which others on the machine disturb less;
// allocs/op are a batch's. Run with:
//
//	go test -run '^$' -bench UsageInsert -benchmem -count 6 ./sqlite/
//
// named=true gives every row a group and an end user, as a gateway whose
// keys have groups and whose clients name their users writes them.
// journaled=true first journals each batch's reservations (a
// transaction of its own, as the flusher writes them) that its usage
// then settles: ns/row is both transactions, the flush of requests under
// a budget.
func BenchmarkUsageInsert(b *testing.B) {
	for _, c := range []struct {
		rows             int
		named, journaled bool
	}{
		{128, false, false}, {50, false, false}, {128, true, false}, {128, false, true},
	} {
		b.Run(fmt.Sprintf("rows=%d/named=%v/journaled=%v", c.rows, c.named, c.journaled), func(b *testing.B) {
			db := openTemp(b)
			b.Cleanup(func() { db.Close() })
			benchUsageInsert(b, db, c.rows, c.named, c.journaled)
		})
	}
}

// BenchmarkUsageInsertIndexes is BenchmarkUsageInsert's rows=128 with
// one of usage_records' indexes dropped at a time (none=the schema's):
// the difference is what that index costs a row.
func BenchmarkUsageInsertIndexes(b *testing.B) {
	db := openTemp(b)
	var names []string
	rows, err := db.write.QueryContext(b.Context(),
		`SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'usage_records' AND sql IS NOT NULL ORDER BY name`)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			b.Fatal(err)
		}
		names = append(names, name)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	rows.Close()
	db.Close()
	for _, drop := range append([]string{"none"}, names...) {
		b.Run("without="+drop, func(b *testing.B) {
			db := openTemp(b)
			b.Cleanup(func() { db.Close() })
			if drop != "none" {
				if _, err := db.write.ExecContext(b.Context(), `DROP INDEX `+drop); err != nil {
					b.Fatal(err)
				}
			}
			benchUsageInsert(b, db, 128, false, false)
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
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		for i := range batch {
			// Request ids as the gateway makes them: a process prefix
			// and a counter.
			id := "req_5f3a9c21_" + strconv.Itoa(rows)
			u := weir.Usage{
				RequestID:        id,
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
				Cost:             1_250_000,
				At:               at.Add(time.Duration(rows) * 500 * time.Microsecond),
			}
			if named {
				u.Group, u.EndUser = "team-"+strconv.Itoa(rows%3), "user-"+strconv.Itoa(rows%97)
			}
			batch[i] = u
			reservations[i] = weir.Reservation{RequestID: id, KeyID: u.KeyID, Group: u.Group, Model: u.Model,
				PlatformModel: u.PlatformModel, EndUser: u.EndUser, Estimate: 1_000_000, At: u.At}
			rows++
		}
		b.StartTimer()
		cpu0 := processCPU()
		if journaled {
			if err := db.SpendReserve(b.Context(), reservations); err != nil {
				b.Fatal(err)
			}
		}
		if err := db.UsageInsert(b.Context(), batch); err != nil {
			b.Fatal(err)
		}
		cpu += processCPU() - cpu0
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rows), "ns/row")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(rows), "cpu-ns/row")
}

// processCPU is the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
