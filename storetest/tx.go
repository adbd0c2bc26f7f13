package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/riverqueue/river"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/riverjob"
)

// TxStore is what ExerciseTx needs of a store: keys and tasks, its
// transactions with TaskUpdateTx inside them, and River's driver on the
// same database, whose InsertTx is the other write a transaction carries
// (as the task service's do).
type TxStore[TTx any] interface {
	weir.Store
	weir.TaskStore
	riverjob.Store[TTx]
	TaskUpdateTx(ctx context.Context, tx TTx, p *weir.TaskUpdateParams) (bool, error)
}

type txArgs struct {
	TaskID string `json:"task_id"`
}

func (txArgs) Kind() string { return "storetest_tx" }

// ExerciseTx runs the transaction suite against a store newStore makes
// (the caller closes it): a task's update and a River job inserted in one
// InTx commit together; an error from fn rolls both back and InTx returns
// it as it is; a panic in fn rolls both back and goes on up; the store's
// own reads outside the transaction (TaskGet) see only what was
// committed; TaskUpdateTx is TaskUpdate's compare-and-set inside the
// transaction, and an unknown task is weir.ErrNotFound there too.
//
// The store's reads must answer while a transaction is open: not on
// SQLite's ":memory:", whose one connection the transaction holds.
func ExerciseTx[TTx any](t *testing.T, newStore func(t *testing.T) TxStore[TTx]) {
	t.Run("InTx", func(t *testing.T) {
		t.Parallel()
		testInTx(t, newStore(t))
	})
}

func testInTx[TTx any](t *testing.T, db TxStore[TTx]) {
	ctx := t.Context()
	if err := riverjob.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	client, err := river.NewClient(db.RiverDriver(), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	k := newKey(1)
	mustCreate(t, db, k)
	task := newTask(1, k.ID)
	createTasks(t, db, &task)
	admit := &weir.TaskUpdateParams{ID: task.ID, Update: weir.TaskUpdate{
		From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskAdmitted, PlatformModel: "pm",
	}}
	insertJob := func(tx TTx) {
		t.Helper()
		if _, err := client.InsertTx(ctx, tx, txArgs{TaskID: task.ID}, nil); err != nil {
			t.Fatal(err)
		}
	}
	jobCount := func() int {
		t.Helper()
		res, err := client.JobList(ctx, river.NewJobListParams().Kinds(txArgs{}.Kind()))
		if err != nil {
			t.Fatal(err)
		}
		return len(res.Jobs)
	}

	failed := errors.New("river said no")
	err = db.InTx(ctx, func(tx TTx) error {
		if ok, err := db.TaskUpdateTx(ctx, tx, admit); err != nil || !ok {
			t.Fatalf("TaskUpdateTx = %v, %v", ok, err)
		}
		insertJob(tx)
		return failed
	})
	if err != failed {
		t.Errorf("InTx returned %v, want fn's error as it is", err)
	}
	if got, _ := db.TaskGet(ctx, task.ID); got.Status != weir.TaskQueued || jobCount() != 0 {
		t.Fatalf("after a failed InTx: task %s, %d jobs; want queued and none", got.Status, jobCount())
	}

	func() {
		defer func() {
			if recover() == nil {
				t.Errorf("InTx swallowed fn's panic")
			}
		}()
		db.InTx(ctx, func(tx TTx) error {
			if _, err := db.TaskUpdateTx(ctx, tx, admit); err != nil {
				t.Fatal(err)
			}
			insertJob(tx)
			panic("boom")
		})
	}()
	if got, _ := db.TaskGet(ctx, task.ID); got.Status != weir.TaskQueued || jobCount() != 0 {
		t.Fatalf("after a panic in InTx: task %s, %d jobs; want queued and none", got.Status, jobCount())
	}

	err = db.InTx(ctx, func(tx TTx) error {
		if ok, err := db.TaskUpdateTx(ctx, tx, admit); err != nil || !ok {
			t.Fatalf("TaskUpdateTx = %v, %v", ok, err)
		}
		// Reads outside the transaction see only what is committed.
		if got, err := db.TaskGet(ctx, task.ID); err != nil || got.Status != weir.TaskQueued {
			t.Errorf("TaskGet inside the transaction = %s, %v; want queued", got.Status, err)
		}
		insertJob(tx)
		return nil
	})
	if err != nil {
		t.Fatalf("InTx: %v", err)
	}
	got, err := db.TaskGet(ctx, task.ID)
	if err != nil || got.Status != weir.TaskAdmitted || got.PlatformModel != "pm" || jobCount() != 1 {
		t.Fatalf("after InTx: task %+v (%v), %d jobs; want admitted on pm and one job", got, err, jobCount())
	}
	// The CAS inside a transaction: the task has moved on.
	err = db.InTx(ctx, func(tx TTx) error {
		ok, err := db.TaskUpdateTx(ctx, tx, admit)
		if ok {
			t.Errorf("TaskUpdateTx from queued applied to an admitted task")
		}
		return err
	})
	if err != nil {
		t.Errorf("InTx: %v", err)
	}
	// And of a task that is not there.
	err = db.InTx(ctx, func(tx TTx) error {
		_, err := db.TaskUpdateTx(ctx, tx, &weir.TaskUpdateParams{ID: "video_nope", Update: admit.Update})
		return err
	})
	if !errors.Is(err, weir.ErrNotFound) {
		t.Errorf("TaskUpdateTx of an unknown task: %v, want ErrNotFound", err)
	}
}
