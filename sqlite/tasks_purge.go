package sqlite

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
	WHERE finished_at IS NOT NULL AND finished_at < ?
	AND status IN ('succeeded', 'failed', 'cancelled', 'expired')
	ORDER BY finished_at LIMIT ?)`

// TaskPurge removes up to p.Limit terminal tasks that finished before
// p.FinishedBefore, oldest first, in one short transaction; call it again
// while it returns p.Limit.
func (db *DB) TaskPurge(ctx context.Context, p *weir.TaskPurgeParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, fmt.Errorf("purge tasks: %w", err)
	}
	res, err := db.write.ExecContext(ctx, taskPurgeSQL, formatTime(p.FinishedBefore), p.Limit)
	if err != nil {
		return 0, fmt.Errorf("purge tasks: %w", classify(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("purge tasks: %w", err)
	}
	return int(n), nil
}
