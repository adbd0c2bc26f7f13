package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/internal/rowscan"
)

var _ weir.OverrideStore = (*DB)(nil)

const overrideColumns = `scope, kind, limit_value, ends_at, set_at`

// OverrideSet stores o in place of its scope's override of its kind; a
// pause is only extended (the upsert's WHERE keeps a later stored end).
func (db *DB) OverrideSet(ctx context.Context, o weir.Override) error {
	if err := o.Validate(); err != nil {
		return fmt.Errorf("set %s of %s: %w", o.Kind, o.Scope, err)
	}
	_, err := db.pool.Exec(ctx, `INSERT INTO scope_overrides (`+overrideColumns+`) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (scope, kind) DO UPDATE SET
			limit_value = excluded.limit_value, ends_at = excluded.ends_at, set_at = excluded.set_at
		WHERE scope_overrides.kind <> 'pause' OR excluded.ends_at > scope_overrides.ends_at`,
		o.Scope, string(o.Kind), o.Limit, nullTime(o.Until), dbTime(o.SetAt))
	if err != nil {
		return fmt.Errorf("set %s of %s: %w", o.Kind, o.Scope, classify(err))
	}
	return nil
}

// OverrideList returns every override by scope (its "C" collation: byte
// order), then kind.
func (db *DB) OverrideList(ctx context.Context) ([]weir.Override, error) {
	return listAll(ctx, db, "overrides", `SELECT `+overrideColumns+` FROM scope_overrides ORDER BY scope, kind`, scanOverride)
}

// OverrideDelete removes the overrides p selects.
func (db *DB) OverrideDelete(ctx context.Context, p *weir.OverrideDeleteParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, fmt.Errorf("delete overrides: %w", err)
	}
	where, args := []string{"kind = $1"}, []any{string(p.Kind)}
	if p.Scope != "" {
		args = append(args, p.Scope)
		where = append(where, fmt.Sprintf("scope = $%d", len(args)))
	}
	if !p.EndedBy.IsZero() {
		args = append(args, dbTime(p.EndedBy))
		where = append(where, fmt.Sprintf("ends_at IS NOT NULL AND ends_at <= $%d", len(args)))
	}
	tag, err := db.pool.Exec(ctx, `DELETE FROM scope_overrides WHERE `+strings.Join(where, " AND "), args...)
	if err != nil {
		return 0, fmt.Errorf("delete %s overrides: %w", p.Kind, classify(err))
	}
	return int(tag.RowsAffected()), nil
}

// scanOverride reads one row of overrideColumns.
func scanOverride(row rowscan.Row) (weir.Override, error) {
	var (
		o     weir.Override
		kind  string
		until *time.Time
	)
	if err := row.Scan(&o.Scope, &kind, &o.Limit, &until, &o.SetAt); err != nil {
		return weir.Override{}, err
	}
	o.Kind, o.Until, o.SetAt = weir.OverrideKind(kind), fromNullTime(until), o.SetAt.UTC()
	return o, nil
}
