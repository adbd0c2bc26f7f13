package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/internal/rowscan"
)

var _ weir.OverrideStore = (*DB)(nil)

const (
	overrideColumns = `scope, kind, limit_value, ends_at, set_at`
	overrideListSQL = `SELECT ` + overrideColumns + ` FROM scope_overrides ORDER BY scope, kind`
)

// OverrideSet stores o in place of its scope's override of its kind; a
// pause is only extended (the upsert's WHERE keeps a later stored end).
func (db *DB) OverrideSet(ctx context.Context, o weir.Override) error {
	if err := o.Validate(); err != nil {
		return fmt.Errorf("set %s of %s: %w", o.Kind, o.Scope, err)
	}
	var until sql.NullString
	if !o.Until.IsZero() {
		until = sql.NullString{String: formatTime(o.Until), Valid: true}
	}
	_, err := db.write.ExecContext(ctx, `INSERT INTO scope_overrides (`+overrideColumns+`) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (scope, kind) DO UPDATE SET
			limit_value = excluded.limit_value, ends_at = excluded.ends_at, set_at = excluded.set_at
		WHERE scope_overrides.kind <> 'pause' OR excluded.ends_at > scope_overrides.ends_at`,
		o.Scope, string(o.Kind), o.Limit, until, formatTime(o.SetAt))
	if err != nil {
		return fmt.Errorf("set %s of %s: %w", o.Kind, o.Scope, classify(err))
	}
	return nil
}

// OverrideList returns every override by scope (BINARY: byte order),
// then kind.
func (db *DB) OverrideList(ctx context.Context) ([]weir.Override, error) {
	return listStmt(ctx, db.overrideList, "overrides", scanOverride)
}

// OverrideDelete removes the overrides p selects.
func (db *DB) OverrideDelete(ctx context.Context, p *weir.OverrideDeleteParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, fmt.Errorf("delete overrides: %w", err)
	}
	where, args := []string{"kind = ?"}, []any{string(p.Kind)}
	if p.Scope != "" {
		where, args = append(where, "scope = ?"), append(args, p.Scope)
	}
	if !p.EndedBy.IsZero() {
		where, args = append(where, "ends_at IS NOT NULL AND ends_at <= ?"), append(args, formatTime(p.EndedBy))
	}
	res, err := db.write.ExecContext(ctx, `DELETE FROM scope_overrides WHERE `+strings.Join(where, " AND "), args...)
	if err != nil {
		return 0, fmt.Errorf("delete %s overrides: %w", p.Kind, classify(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("delete %s overrides: %w", p.Kind, err)
	}
	return int(n), nil
}

// scanOverride reads one row of overrideColumns.
func scanOverride(row rowscan.Row) (weir.Override, error) {
	var (
		o           weir.Override
		kind, setAt string
		until       sql.NullString
	)
	if err := row.Scan(&o.Scope, &kind, &o.Limit, &until, &setAt); err != nil {
		return weir.Override{}, err
	}
	o.Kind = weir.OverrideKind(kind)
	var err error
	if o.SetAt, err = parseTime(setAt); err != nil {
		return weir.Override{}, fmt.Errorf("override %s %s: %w", o.Scope, kind, err)
	}
	if until.Valid {
		if o.Until, err = parseTime(until.String); err != nil {
			return weir.Override{}, fmt.Errorf("override %s %s: %w", o.Scope, kind, err)
		}
	}
	return o, nil
}
