package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/internal/rowscan"
)

var _ weir.BudgetStore = (*DB)(nil)

const budgetColumns = `id, subject_type, subject_name, amount,
	window_unit, window_every_s, window_zone, window_anchor, mode, alerts, created_at, updated_at`

// BudgetCreate stores b with its defaults.
func (db *DB) BudgetCreate(ctx context.Context, b weir.Budget) error {
	b = b.WithDefaults()
	if err := b.ValidateStored(); err != nil {
		return fmt.Errorf("create budget %q: %w", b.ID, err)
	}
	_, err := db.pool.Exec(ctx, `INSERT INTO budgets (`+budgetColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		b.ID, b.Subject.Type, b.Subject.Name, int64(b.Amount),
		b.Window.Unit, int64(b.Window.Every/time.Second), b.Window.Zone, nullTime(b.Window.Anchor),
		string(b.Mode), dbAlerts(b.Alerts), dbTime(b.CreatedAt), dbTime(b.UpdatedAt))
	if err != nil {
		return fmt.Errorf("create budget %s: %w", b.ID, classify(err))
	}
	return nil
}

// BudgetGet finds a budget by ID.
func (db *DB) BudgetGet(ctx context.Context, id string) (weir.Budget, error) {
	b, err := scanBudget(db.pool.QueryRow(ctx, `SELECT `+budgetColumns+` FROM budgets WHERE id = $1`, id))
	if err != nil {
		return weir.Budget{}, fmt.Errorf("load budget %s: %w", id, classify(err))
	}
	return b, nil
}

// BudgetList returns the budgets f selects by subject ("C" collation:
// byte order), then ID.
func (db *DB) BudgetList(ctx context.Context, f weir.BudgetFilter) ([]weir.Budget, error) {
	q, args := `SELECT `+budgetColumns+` FROM budgets`, []any(nil)
	if f.Subject != (weir.BudgetSubject{}) {
		q, args = q+` WHERE subject_type = $1 AND subject_name = $2`, []any{f.Subject.Type, f.Subject.Name}
	}
	return listAll(ctx, db, "budgets", q+` ORDER BY subject_type, subject_name, id`, scanBudget, args...)
}

// BudgetUpdate changes what p sets in one statement; when it changes
// nothing, a second look says whether the budget is missing or moved on.
func (db *DB) BudgetUpdate(ctx context.Context, p *weir.BudgetUpdateParams) (weir.Budget, error) {
	if err := p.Validate(); err != nil {
		return weir.Budget{}, fmt.Errorf("update budget %s: %w", p.ID, err)
	}
	var (
		amount *int64
		mode   *string
		alerts []int32
	)
	if p.Amount != nil {
		a := int64(*p.Amount)
		amount = &a
	}
	if p.Mode != nil {
		m := string(*p.Mode)
		mode = &m
	}
	if p.Alerts != nil {
		alerts = dbAlerts(*p.Alerts)
	}
	b, err := scanBudget(db.pool.QueryRow(ctx, `UPDATE budgets
		SET amount = coalesce($1, amount), mode = coalesce($2, mode), alerts = coalesce($3, alerts), updated_at = $4
		WHERE id = $5 AND ($6::timestamptz IS NULL OR updated_at = $6)
		RETURNING `+budgetColumns, amount, mode, alerts, dbTime(p.At), p.ID, nullTime(p.IfUpdatedAt)))
	if errors.Is(err, weir.ErrNotFound) && !p.IfUpdatedAt.IsZero() {
		if _, gerr := db.BudgetGet(ctx, p.ID); gerr == nil {
			err = fmt.Errorf("%w: updated since %s", weir.ErrConflict, p.IfUpdatedAt.UTC().Format(time.RFC3339Nano))
		}
	}
	if err != nil {
		return weir.Budget{}, fmt.Errorf("update budget %s: %w", p.ID, classify(err))
	}
	return b, nil
}

// BudgetDelete removes a budget and its alerts in one transaction.
func (db *DB) BudgetDelete(ctx context.Context, id string) error {
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM budgets WHERE id = $1`, id)
		if err != nil {
			return classify(err)
		}
		if tag.RowsAffected() == 0 {
			return weir.ErrNotFound
		}
		_, err = tx.Exec(ctx, `DELETE FROM budget_alerts WHERE budget_id = $1`, id)
		return classify(err)
	})
	if err != nil {
		return fmt.Errorf("delete budget %s: %w", id, err)
	}
	return nil
}

// BudgetAlertClaim inserts the alert's row if it is not there: the
// primary key lets one insert of many succeed, on any replica.
func (db *DB) BudgetAlertClaim(ctx context.Context, p *weir.BudgetAlertClaimParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("claim budget %s's alert: %w", p.BudgetID, err)
	}
	tag, err := db.pool.Exec(ctx, `INSERT INTO budget_alerts (budget_id, window_from, threshold, sent_at)
		VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`, p.BudgetID, dbTime(p.WindowFrom), p.Threshold, dbTime(p.At))
	if err != nil {
		return false, fmt.Errorf("claim budget %s's alert at %d%%: %w", p.BudgetID, p.Threshold, classify(err))
	}
	return tag.RowsAffected() == 1, nil
}

// scanBudget reads one row of budgetColumns; no row is weir.ErrNotFound.
func scanBudget(row rowscan.Row) (weir.Budget, error) {
	var (
		b             weir.Budget
		amount, every int64
		mode          string
		anchor        *time.Time
		alerts        []int32
	)
	err := row.Scan(&b.ID, &b.Subject.Type, &b.Subject.Name, &amount,
		&b.Window.Unit, &every, &b.Window.Zone, &anchor, &mode, &alerts, &b.CreatedAt, &b.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return weir.Budget{}, weir.ErrNotFound
	}
	if err != nil {
		return weir.Budget{}, err
	}
	b.Amount, b.Window.Every, b.Mode = weir.Money(amount), time.Duration(every)*time.Second, weir.BudgetMode(mode)
	b.Window.Anchor, b.CreatedAt, b.UpdatedAt = fromNullTime(anchor), b.CreatedAt.UTC(), b.UpdatedAt.UTC()
	for _, a := range alerts {
		b.Alerts = append(b.Alerts, int(a))
	}
	return b, nil
}

// dbAlerts is thresholds as an integer[]: never NULL, an empty list for
// none (Validate has held each to 1..1000).
func dbAlerts(alerts []int) []int32 {
	out := make([]int32, len(alerts))
	for i, a := range alerts {
		out[i] = int32(a)
	}
	return out
}
