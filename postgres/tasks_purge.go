package postgres

import (
	"context"
	"fmt"

	"github.com/weir-gateway/weir"
)

// taskPurgeSQL removes the oldest finished tasks; the status check keeps
// a task whose finished_at was set without a terminal status (none is)
// from going.
const taskPurgeSQL = `DELETE FROM tasks WHERE seq IN (
	SELECT seq FROM tasks
	WHERE finished_at IS NOT NULL AND finished_at < $1
	AND status IN ` + terminalStatuses + `
	ORDER BY finished_at LIMIT $2)`

// TaskPurge removes up to p.Limit terminal tasks that finished before
// p.FinishedBefore, oldest first, in one statement; call it again while it
// returns p.Limit.
func (db *DB) TaskPurge(ctx context.Context, p *weir.TaskPurgeParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, fmt.Errorf("purge tasks: %w", err)
	}
	tag, err := db.pool.Exec(ctx, taskPurgeSQL, dbTime(p.FinishedBefore), p.Limit)
	if err != nil {
		return 0, fmt.Errorf("purge tasks: %w", classify(err))
	}
	return int(tag.RowsAffected()), nil
}
