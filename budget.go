package weir

import "time"

// A Budget is an amount of Money a subject may spend in each window:
// a key, a group, a public model or a platform model. docs/spend.md says
// how budgets are kept and the bound on what a hard one lets through.
type Budget struct {
	ID      string
	Subject BudgetSubject
	Amount  Money
	Window  Window
	Mode    BudgetMode
	// Alerts are thresholds in percent of Amount, ascending (e.g. 80,
	// 100): crossing each sends one signed event per window.
	Alerts    []int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// BudgetSubject is what a budget counts the spend of: Type is one of
// BudgetSubjectTypes, Name a key's id, a group's, model's or platform
// model's name.
type BudgetSubject struct {
	Type string
	Name string
}

// BudgetSubjectTypes are the kinds of subject a budget may have.
var BudgetSubjectTypes = []string{"key", "group", "model", "platform_model"}

// BudgetMode says what a budget does when spend reaches it.
type BudgetMode string

const (
	// BudgetHard refuses a request whose estimated cost does not fit in
	// what is left (429 budget_exceeded).
	BudgetHard BudgetMode = "hard"
	// BudgetSoft refuses nothing: it alerts and counts.
	BudgetSoft BudgetMode = "soft"
	// BudgetShadow is judged as a hard one, refuses nothing, and counts
	// what it would have refused.
	BudgetShadow BudgetMode = "shadow"
)

// A Window is the stretch of time a budget's spend counts in. Either a
// calendar Unit ("day", "week" from Monday, "month") in the IANA Zone
// ("" is UTC), or periods of Every from Anchor (a budget's creation, by
// default), as other gateways' budget_duration resets.
type Window struct {
	Unit   string
	Zone   string
	Every  time.Duration
	Anchor time.Time
}
