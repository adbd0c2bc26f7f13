package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// fillTasks stores n tasks of 10 keys in one transaction, the first
// history of them terminal, and the rest in status. Inputs are ~300 bytes
// of JSON, a typical video prompt.
func fillTasks(tb testing.TB, db *DB, history, n int, status weir.TaskStatus) {
	tb.Helper()
	ctx := context.Background()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 10 {
		if err := db.KeyCreate(ctx, weir.APIKey{ID: fmt.Sprintf("key-%d", i), Hash: fmt.Sprintf("hash-%d", i), CreatedAt: at}); err != nil {
			tb.Fatal(err)
		}
	}
	input := []byte(fmt.Sprintf(`{"model":"sora-2","prompt":%q,"seconds":"8","size":"1280x720"}`,
		"A calico cat plays a grand piano on a moonlit stage while the audience of owls applauds; slow dolly-in, warm light, shallow depth of field, 35mm film grain, gentle smoke in the air."))
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		for i := range history + n {
			t := weir.Task{
				ID:        fmt.Sprintf("video_%012d", i),
				KeyID:     fmt.Sprintf("key-%d", i%10),
				Kind:      "video",
				Model:     "sora-2",
				Input:     input,
				Priority:  int32(i % 3),
				Status:    status,
				Candidate: -1,
				CreatedAt: at.Add(time.Duration(i) * time.Millisecond),
				Deadline:  at.Add(time.Hour + time.Duration(i)*time.Millisecond),
			}
			if i < history {
				t.Status, t.Result, t.FinishedAt = weir.TaskSucceeded, []byte(`{"id":"up","status":"completed"}`), at.Add(time.Minute)
			}
			if _, err := db.taskCreateTx(ctx, tx, &t); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkTaskListQueued lists 100,000 queued tasks in Seq order from a
// file database that also holds 100,000 finished ones, as the task service
// does at start-up: whole; in pages of 1,000; and whole right after
// opening the file (a restart, with the OS's page cache warm). Run with:
//
//	go test -run '^$' -bench TaskListQueued -benchtime 5x -benchmem ./sqlite/
func BenchmarkTaskListQueued(b *testing.B) {
	const history, queued = 100_000, 100_000
	path := filepath.Join(b.TempDir(), "weir.db")
	db, err := Open(b.Context(), path)
	if err != nil {
		b.Fatal(err)
	}
	fillTasks(b, db, history, queued, weir.TaskQueued)
	filter := weir.TaskFilter{Statuses: []weir.TaskStatus{weir.TaskQueued}}
	list := func(b *testing.B, db *DB) {
		got, err := db.TaskList(b.Context(), filter)
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != queued {
			b.Fatalf("listed %d tasks, want %d", len(got), queued)
		}
	}

	b.Run("whole", func(b *testing.B) {
		for b.Loop() {
			list(b, db)
		}
		b.ReportMetric(float64(queued)*float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
	})
	b.Run("pages", func(b *testing.B) {
		for b.Loop() {
			f, n := filter, 0
			f.Limit = 1000
			for {
				page, err := db.TaskList(b.Context(), f)
				if err != nil {
					b.Fatal(err)
				}
				if len(page) == 0 {
					break
				}
				n += len(page)
				f.AfterSeq = page[len(page)-1].Seq
			}
			if n != queued {
				b.Fatalf("listed %d tasks, want %d", n, queued)
			}
		}
		b.ReportMetric(float64(queued)*float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
	})
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	b.Run("open_and_list", func(b *testing.B) {
		for b.Loop() {
			db, err := Open(b.Context(), path)
			if err != nil {
				b.Fatal(err)
			}
			list(b, db)
			b.StopTimer()
			if err := db.Close(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
}

// BenchmarkTaskCreate submits tasks one at a time, each its own commit,
// as POST /v1/videos does, and reports tasks/s. Run with:
//
//	go test -run '^$' -bench TaskCreate -benchtime 3s ./sqlite/
func BenchmarkTaskCreate(b *testing.B) {
	db := openTemp(b)
	b.Cleanup(func() { db.Close() })
	fillTasks(b, db, 0, 0, weir.TaskQueued) // the keys
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	input := []byte(`{"model":"sora-2","prompt":"a calico cat plays a grand piano","seconds":"8"}`)
	n := 0
	for b.Loop() {
		t := weir.Task{
			ID: fmt.Sprintf("video_%012d", n), KeyID: fmt.Sprintf("key-%d", n%10), Kind: "video", Model: "sora-2",
			Input: input, Status: weir.TaskQueued, Candidate: -1, IdempotencyKey: fmt.Sprintf("idem-%d", n),
			CreatedAt: at, Deadline: at.Add(time.Hour),
		}
		if created, err := db.TaskCreate(b.Context(), &t); err != nil || !created {
			b.Fatal(created, err)
		}
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkTaskUpdate updates tasks, 100 to a transaction as the group
// commit and the dispatcher's commits share one, in a database of 10,000
// finished tasks and 100,000 others, and reports updates/s: the progress
// of running tasks (the status stays), and the admission of queued ones
// (it changes). Run with:
//
//	go test -run '^$' -bench TaskUpdate -benchtime 3s ./sqlite/
func BenchmarkTaskUpdate(b *testing.B) {
	const history, tasks = 10000, 100000
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name   string
		status weir.TaskStatus
		update func(n int) weir.TaskUpdate
	}{
		{"progress", weir.TaskRunning, func(n int) weir.TaskUpdate {
			p := n % 100
			return weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskRunning}, Status: weir.TaskRunning, Progress: &p}
		}},
		{"admit", weir.TaskQueued, func(n int) weir.TaskUpdate {
			cand := 0
			return weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskAdmitted,
				PlatformModel: "openai-sora", Candidate: &cand, AdmittedAt: at.Add(time.Duration(n))}
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			db := openTemp(b)
			b.Cleanup(func() { db.Close() })
			fillTasks(b, db, history, tasks, c.status)
			ctx := context.Background()
			n := 0
			for b.Loop() {
				if n == tasks {
					b.Fatal("no task left to update")
				}
				err := db.InTx(ctx, func(tx *sql.Tx) error {
					for range 100 {
						id := fmt.Sprintf("video_%012d", history+n%tasks)
						ok, err := db.TaskUpdateTx(ctx, tx, &weir.TaskUpdateParams{ID: id, Update: c.update(n)})
						if err != nil || !ok {
							return fmt.Errorf("update %s: %v %w", id, ok, err)
						}
						n++
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "updates/s")
		})
	}
}

// BenchmarkTaskCreateConcurrent submits tasks from 16 goroutines at
// once, as POST /v1/tasks does under load, so that their creates share
// the group commit's transactions; it reports tasks/s and the tasks a
// transaction. Run with:
//
//	go test -run '^$' -bench TaskCreateConcurrent -benchtime 3s ./sqlite/
func BenchmarkTaskCreateConcurrent(b *testing.B) {
	db := openTemp(b)
	b.Cleanup(func() { db.Close() })
	fillTasks(b, db, 0, 0, weir.TaskQueued) // the keys
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	input := []byte(`{"model":"sora-2","prompt":"a calico cat plays a grand piano","seconds":"8"}`)
	var n atomic.Int64
	db.group.mu.Lock()
	txs := db.group.txs
	db.group.mu.Unlock()
	b.SetParallelism(8) // 16 goroutines on 2 CPUs
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			t := weir.Task{
				ID: fmt.Sprintf("video_%012d", i), KeyID: fmt.Sprintf("key-%d", i%10), Kind: "video", Model: "sora-2",
				Input: input, Status: weir.TaskQueued, Candidate: -1, CreatedAt: at, Deadline: at.Add(time.Hour),
			}
			if created, err := db.TaskCreate(context.Background(), &t); err != nil || !created {
				b.Fatal(created, err)
			}
		}
	})
	db.group.mu.Lock()
	txs = db.group.txs - txs
	db.group.mu.Unlock()
	b.ReportMetric(float64(n.Load())/b.Elapsed().Seconds(), "tasks/s")
	b.ReportMetric(float64(n.Load())/float64(max(txs, 1)), "tasks/tx")
}
