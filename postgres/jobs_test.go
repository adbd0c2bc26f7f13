package postgres

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/weir-gateway/weir/pgtest"
	"github.com/weir-gateway/weir/storetest"
)

func TestJobs(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	storetest.ExerciseJobs(t, func(t *testing.T) storetest.JobStore[pgx.Tx] { return openTemp(t) })
}
