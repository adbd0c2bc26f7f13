package sqlite

import (
	"database/sql"
	"testing"

	"github.com/weir-gateway/weir/storetest"
)

func TestJobs(t *testing.T) {
	t.Parallel()
	storetest.ExerciseJobs(t, func(t *testing.T) storetest.JobStore[*sql.Tx] {
		db := openTemp(t)
		t.Cleanup(func() { db.Close() })
		return db
	})
}
