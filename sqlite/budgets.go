package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

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
	var anchor sql.NullString
	if !b.Window.Anchor.IsZero() {
		anchor = sql.NullString{String: formatTime(b.Window.Anchor), Valid: true}
	}
	_, err := db.write.ExecContext(ctx, `INSERT INTO budgets (`+budgetColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		b.ID, b.Subject.Type, b.Subject.Name, int64(b.Amount),
		b.Window.Unit, int64(b.Window.Every/time.Second), b.Window.Zone, anchor,
		string(b.Mode), formatAlerts(b.Alerts), formatTime(b.CreatedAt), formatTime(b.UpdatedAt))
	if err != nil {
		return fmt.Errorf("create budget %s: %w", b.ID, classify(err))
	}
	return nil
}

// BudgetGet finds a budget by ID.
func (db *DB) BudgetGet(ctx context.Context, id string) (weir.Budget, error) {
	b, err := scanBudget(db.read.QueryRowContext(ctx, `SELECT `+budgetColumns+` FROM budgets WHERE id = ?`, id))
	if err != nil {
		return weir.Budget{}, fmt.Errorf("load budget %s: %w", id, err)
	}
	return b, nil
}

// BudgetList returns the budgets f selects by subject, then ID.
func (db *DB) BudgetList(ctx context.Context, f weir.BudgetFilter) ([]weir.Budget, error) {
	q, args := `SELECT `+budgetColumns+` FROM budgets`, []any(nil)
	if f.Subject != (weir.BudgetSubject{}) {
		q, args = q+` WHERE subject_type = ? AND subject_name = ?`, []any{f.Subject.Type, f.Subject.Name}
	}
	return listAll(ctx, db, "budgets", q+` ORDER BY subject_type, subject_name, id`, scanBudget, args...)
}

// BudgetUpdate changes what p sets in one statement; when it changes
// nothing, a second look says whether the budget is missing or moved on.
func (db *DB) BudgetUpdate(ctx context.Context, p *weir.BudgetUpdateParams) (weir.Budget, error) {
	if err := p.Validate(); err != nil {
		return weir.Budget{}, fmt.Errorf("update budget %s: %w", p.ID, err)
	}
	var amount, mode, alerts, ifAt any
	if p.Amount != nil {
		amount = int64(*p.Amount)
	}
	if p.Mode != nil {
		mode = string(*p.Mode)
	}
	if p.Alerts != nil {
		alerts = formatAlerts(*p.Alerts)
	}
	if !p.IfUpdatedAt.IsZero() {
		ifAt = formatTime(p.IfUpdatedAt)
	}
	b, err := scanBudget(db.write.QueryRowContext(ctx, `UPDATE budgets
		SET amount = coalesce(?, amount), mode = coalesce(?, mode), alerts = coalesce(?, alerts), updated_at = ?
		WHERE id = ? AND (? IS NULL OR updated_at = ?)
		RETURNING `+budgetColumns, amount, mode, alerts, formatTime(p.At), p.ID, ifAt, ifAt))
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
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("delete budget %s: %w", id, err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, `DELETE FROM budgets WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete budget %s: %w", id, classify(err))
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return fmt.Errorf("delete budget %s: %w", id, errors.Join(weir.ErrNotFound, err))
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM budget_alerts WHERE budget_id = ?`, id); err != nil {
		return fmt.Errorf("delete budget %s's alerts: %w", id, classify(err))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("delete budget %s: %w", id, err)
	}
	return nil
}

// BudgetAlertClaim inserts the alert's row if it is not there: the
// primary key lets one insert of many succeed.
func (db *DB) BudgetAlertClaim(ctx context.Context, p *weir.BudgetAlertClaimParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("claim budget %s's alert: %w", p.BudgetID, err)
	}
	res, err := db.write.ExecContext(ctx, `INSERT INTO budget_alerts (budget_id, window_from, threshold, sent_at)
		VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`, p.BudgetID, formatTime(p.WindowFrom), p.Threshold, formatTime(p.At))
	if err != nil {
		return false, fmt.Errorf("claim budget %s's alert at %d%%: %w", p.BudgetID, p.Threshold, classify(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("claim budget %s's alert at %d%%: %w", p.BudgetID, p.Threshold, err)
	}
	return n == 1, nil
}

// scanBudget reads one row of budgetColumns; no row is weir.ErrNotFound.
func scanBudget(row rowscan.Row) (weir.Budget, error) {
	var (
		b                         weir.Budget
		amount, every             int64
		mode, alerts, created, up string
		anchor                    sql.NullString
	)
	err := row.Scan(&b.ID, &b.Subject.Type, &b.Subject.Name, &amount,
		&b.Window.Unit, &every, &b.Window.Zone, &anchor, &mode, &alerts, &created, &up)
	if errors.Is(err, sql.ErrNoRows) {
		return weir.Budget{}, weir.ErrNotFound
	}
	if err != nil {
		return weir.Budget{}, err
	}
	b.Amount, b.Window.Every, b.Mode = weir.Money(amount), time.Duration(every)*time.Second, weir.BudgetMode(mode)
	if b.Alerts, err = parseAlerts(alerts); err != nil {
		return weir.Budget{}, fmt.Errorf("budget %s: %w", b.ID, err)
	}
	if b.CreatedAt, err = parseTime(created); err == nil {
		b.UpdatedAt, err = parseTime(up)
	}
	if err == nil && anchor.Valid {
		b.Window.Anchor, err = parseTime(anchor.String)
	}
	if err != nil {
		return weir.Budget{}, fmt.Errorf("budget %s: %w", b.ID, err)
	}
	return b, nil
}

// formatAlerts writes thresholds as "80,100"; none is "".
func formatAlerts(alerts []int) string {
	s := make([]string, len(alerts))
	for i, a := range alerts {
		s[i] = strconv.Itoa(a)
	}
	return strings.Join(s, ",")
}

// parseAlerts reads what formatAlerts wrote; "" is nil.
func parseAlerts(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	out := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("stored alerts %q: %w", s, err)
		}
		out[i] = n
	}
	return out, nil
}
