package sqlite

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/weir-gateway/weir"
)

const usageColumns = `request_id, key_id, model, platform_model, endpoint,
	prompt_tokens, completion_tokens, waited_ns, latency_ns, status, outcome, at`

// UsageInsert records a batch in one transaction: all of it or nothing.
// A row whose RequestID is already stored (or earlier in the batch) is
// skipped, so a flush retried after an unknown outcome counts once.
func (db *DB) UsageInsert(ctx context.Context, batch []weir.Usage) (err error) {
	if len(batch) == 0 {
		return nil
	}
	for i, u := range batch {
		if u.RequestID == "" || u.KeyID == "" || u.At.IsZero() {
			return fmt.Errorf("insert usage: row %d (request %q): %w: request id, key id and time are required",
				i, u.RequestID, weir.ErrInvalid)
		}
	}
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("insert usage: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO usage_records (`+usageColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (request_id) DO NOTHING`)
	if err != nil {
		return fmt.Errorf("insert usage: %w", err)
	}
	defer stmt.Close()
	for i, u := range batch {
		_, err := stmt.ExecContext(ctx, u.RequestID, u.KeyID, u.Model, u.PlatformModel, u.Endpoint,
			u.PromptTokens, u.CompletionTokens, int64(u.Waited), int64(u.Latency),
			int64(u.Status), u.Outcome, formatTime(u.At))
		if err != nil {
			return fmt.Errorf("insert usage: row %d (request %s, key %s): %w", i, u.RequestID, u.KeyID, classify(err))
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("insert usage: commit: %w", err)
	}
	return nil
}

// UsageList returns usage newest first, filtered by key and time, at most
// f.Limit records if it is positive.
func (db *DB) UsageList(ctx context.Context, f weir.UsageFilter) ([]weir.Usage, error) {
	if f.Limit < 0 {
		return nil, fmt.Errorf("list usage: %w: negative limit %d", weir.ErrInvalid, f.Limit)
	}
	var (
		where []string
		args  []any
	)
	if f.KeyID != "" {
		where, args = append(where, "key_id = ?"), append(args, f.KeyID)
	}
	if !f.Since.IsZero() {
		where, args = append(where, "at >= ?"), append(args, formatTime(f.Since))
	}
	q := `SELECT ` + usageColumns + ` FROM usage_records`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY at DESC, seq DESC`
	if f.Limit > 0 {
		q, args = q+` LIMIT ?`, append(args, f.Limit)
	}
	rows, err := db.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list usage: %w", err)
	}
	defer rows.Close()
	var out []weir.Usage
	for rows.Next() {
		var (
			u               weir.Usage
			waited, latency int64
			status          int64
			at              string
		)
		if err := rows.Scan(&u.RequestID, &u.KeyID, &u.Model, &u.PlatformModel, &u.Endpoint,
			&u.PromptTokens, &u.CompletionTokens, &waited, &latency, &status, &u.Outcome, &at); err != nil {
			return nil, fmt.Errorf("list usage: %w", err)
		}
		u.Waited, u.Latency, u.Status = time.Duration(waited), time.Duration(latency), int(status)
		if u.At, err = parseTime(at); err != nil {
			return nil, fmt.Errorf("list usage: request %s: %w", u.RequestID, err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list usage: %w", err)
	}
	return out, nil
}
