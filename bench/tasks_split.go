package bench

import (
	"fmt"
	"strings"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider/mock"
)

// The drain's finer splits of a task's lease: admission to the upstream
// submit through its River job's times (inserted with the commit of the
// admission, fetched by a worker's producer), and a job's end to the
// gateway noticing it through the arrival of the poll that saw the end.

// jobTimesSQLite and jobTimesPostgres read, for each task's run job,
// when River inserted it (in the commit of the task's admission) and
// when a producer last fetched it. Each time is read as text: SQLite's are text, and
// PostgreSQL's are cast to the same ISO 8601 form.
//
// Neither is a commit. created_at is River's client's clock as it sends
// the insert, inside the admission's transaction: after its begin and
// the tasks' update, before the insert's statement, River's notification
// and the commit; so admitted->inserted is the transaction's first part
// and inserted->fetched holds the rest of it, then the notification's
// way to a producer and its fetch. On PostgreSQL attempted_at is the
// fetch statement's now(), before its rows reach the producer: that and
// the worker's start are in fetched->upstream submit.
const (
	jobTimesSQLite   = `SELECT json_extract(args, '$.task_id'), created_at, coalesce(attempted_at, '') FROM river_job WHERE kind = 'weir_task_run'`
	jobTimesPostgres = `SELECT args->>'task_id', to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), ` +
		`coalesce(to_char(attempted_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '') FROM river_job WHERE kind = 'weir_task_run'`
)

// jobTimes is a run job's insert and latest fetch.
type jobTimes struct{ inserted, fetched time.Time }

// parseDBTime parses a timestamp as the job times' queries read it (UTC, with
// or without a T and a zone).
func parseDBTime(s string) (time.Time, error) {
	s = strings.TrimSuffix(strings.Replace(s, " ", "T", 1), "Z")
	if i := strings.IndexByte(s, '+'); i > 0 {
		s = s[:i]
	}
	return time.ParseInLocation("2006-01-02T15:04:05.999999999", s, time.UTC)
}

// rows are a query's rows, database/sql's or pgx's.
type rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// scanJobTimes reads the job times' queries' three text columns from rs
// to their end.
func scanJobTimes(rs rows) (map[string]jobTimes, error) {
	out := map[string]jobTimes{}
	for rs.Next() {
		var id, ins, fetched string
		if err := rs.Scan(&id, &ins, &fetched); err != nil {
			return nil, err
		}
		var jt jobTimes
		var err error
		if jt.inserted, err = parseDBTime(ins); err != nil {
			return nil, err
		}
		if fetched != "" {
			if jt.fetched, err = parseDBTime(fetched); err != nil {
				return nil, err
			}
		}
		out[id] = jt
	}
	return out, rs.Err()
}

// leaseSplit sums the finer splits of the tasks' leases.
type leaseSplit struct {
	n, polled                              int
	commit, fetch, start, toPoll, fromPoll time.Duration
}

// add adds task t, its upstream job j, the job's River times jt (zero
// when unknown) and when the poll that saw j's end arrived (zero when
// unknown).
func (s *leaseSplit) add(t weir.Task, j mock.JobInfo, jt jobTimes, lastPoll time.Time) {
	if !jt.inserted.IsZero() && !jt.fetched.IsZero() {
		s.n++
		s.commit += jt.inserted.Sub(t.AdmittedAt)
		s.fetch += jt.fetched.Sub(jt.inserted)
		s.start += j.CreatedAt.Sub(jt.fetched)
	}
	if !lastPoll.IsZero() {
		s.polled++
		s.toPoll += lastPoll.Sub(j.EndsAt)
		s.fromPoll += t.FinishedAt.Sub(lastPoll)
	}
}

// line is the split's line of the drain's report.
func (s *leaseSplit) line() string {
	mean := func(d time.Duration, n int) string {
		if n == 0 {
			return "-"
		}
		return (d / time.Duration(n)).Round(100 * time.Microsecond).String()
	}
	return fmt.Sprintf("split  per task: admitted->job inserted %s, ->fetched %s, ->upstream submit %s (of %d); job end->its last poll arrived %s, ->gateway noticed %s (of %d)",
		mean(s.commit, s.n), mean(s.fetch, s.n), mean(s.start, s.n), s.n, mean(s.toPoll, s.polled), mean(s.fromPoll, s.polled), s.polled)
}
