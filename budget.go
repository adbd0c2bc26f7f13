package weir

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

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
// model's name, or an end user's id (the request's user, Usage.EndUser).
// A "user" subject named EveryEndUser ("user:*") is a budget of each end
// user apart: every end user gets its amount in a window of its own.
type BudgetSubject struct {
	Type string
	Name string
}

// BudgetSubjectTypes are the kinds of subject a budget may have.
var BudgetSubjectTypes = []string{"key", "group", "model", "platform_model", "user"}

// EveryEndUser names, as a "user" subject's name, every end user apart
// ("user:*"): see BudgetSubject.
const EveryEndUser = "*"

// EveryEndUser reports whether s is "user:*", a budget of each end user.
func (s BudgetSubject) EveryEndUser() bool { return s.Type == "user" && s.Name == EveryEndUser }

// ForEndUser is b, a budget of every end user ("user:*"), as the budget
// of end user user alone: its ID EndUserBudgetID(b.ID, user), its
// subject "user:"+user. Its alerts, scope and spend are that end user's.
func (b Budget) ForEndUser(user string) Budget {
	b.ID = EndUserBudgetID(b.ID, user)
	b.Subject = BudgetSubject{Type: "user", Name: user}
	return b
}

// endUserBudgetSep joins a "user:*" budget's ID and an end user's in the
// ID of the end user's own budget: "bgt_x/user:alice". No budget's ID
// holds it (store IDs are bgt_ and letters, the config file's
// "cfg:user:*:month").
const endUserBudgetSep = "/user:"

// EndUserBudgetID is the ID of end user user's budget of the "user:*"
// budget id.
func EndUserBudgetID(id, user string) string { return id + endUserBudgetSep + user }

// EndUserOfBudgetID splits the ID of an end user's budget into its
// "user:*" budget's ID and the end user; ok is false for any other ID.
func EndUserOfBudgetID(id string) (budget, user string, ok bool) {
	return strings.Cut(id, endUserBudgetSep)
}

// MaxEndUserBytes is the longest end user id a request may name
// (Usage.EndUser): Anthropic's metadata.user_id allows as long.
const MaxEndUserBytes = 256

// ValidateEndUser reports what is wrong with an end user id as a request
// names it ("" names none): more than MaxEndUserBytes, not UTF-8, or a
// control character. An id is kept and budgeted as it is, never cut.
func ValidateEndUser(user string) error {
	switch {
	case len(user) > MaxEndUserBytes:
		return fmt.Errorf("%w: %d bytes long; at most %d are allowed", ErrInvalid, len(user), MaxEndUserBytes)
	case !utf8.ValidString(user):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalid)
	case strings.IndexFunc(user, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: it holds a control character", ErrInvalid)
	}
	return nil
}

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

// Budget limits, as Validate holds them.
const (
	// MaxBudgetAlerts is the most thresholds a budget may alert at.
	MaxBudgetAlerts = 8
	// MaxBudgetAlert is the highest threshold, in percent: a soft budget
	// may alert well past its amount.
	MaxBudgetAlert = 1000
)

// WithDefaults is b with what was left out filled in: the mode hard,
// and a rolling window's anchor b's creation. Stores, the admin API, the
// CLI and the config apply it before Validate, so that every budget
// stored or loaded says its mode and anchor.
func (b Budget) WithDefaults() Budget {
	if b.Mode == "" {
		b.Mode = BudgetHard
	}
	if !b.Window.Calendar() && b.Window.Anchor.IsZero() {
		b.Window.Anchor = b.CreatedAt
	}
	return b
}

// Valid reports whether m is a known mode; "" is not (WithDefaults makes
// it hard).
func (m BudgetMode) Valid() bool { return m == BudgetHard || m == BudgetSoft || m == BudgetShadow }

// Validate reports the first problem with b's content as a *FieldError
// (matching ErrInvalid) named as the config file and the admin API name
// it: "subject", "amount", "window", "zone", "mode", "alerts". It does
// not ask for an ID or times, which ValidateStored adds.
func (b Budget) Validate() error {
	if err := b.validate(); err != nil {
		return err
	}
	return nil
}

func (b Budget) validate() *FieldError {
	if err := b.Subject.validate(); err != nil {
		return err
	}
	if b.Amount <= 0 {
		return invalidf("amount", "must be more than 0")
	}
	if err := b.Window.validate(); err != nil {
		return err
	}
	if !b.Mode.Valid() {
		return invalidf("mode", "unknown mode %q: want hard, soft or shadow", b.Mode)
	}
	return validAlerts(b.Alerts)
}

// ValidateStored is Validate and what a store needs besides: an ID and
// the creation and update times.
func (b Budget) ValidateStored() error {
	switch {
	case b.ID == "":
		return invalidf("id", "required")
	case b.CreatedAt.IsZero() || b.UpdatedAt.IsZero():
		return invalidf("created_at", "creation and update times are required")
	}
	return b.Validate()
}

// validAlerts holds the thresholds to at most MaxBudgetAlerts, each from
// 1 to MaxBudgetAlert percent, strictly ascending.
func validAlerts(alerts []int) *FieldError {
	if len(alerts) > MaxBudgetAlerts {
		return invalidf("alerts", "at most %d thresholds, not %d", MaxBudgetAlerts, len(alerts))
	}
	for i, a := range alerts {
		switch {
		case a < 1 || a > MaxBudgetAlert:
			return invalidf("alerts", "%d is not a percentage from 1 to %d", a, MaxBudgetAlert)
		case i > 0 && a <= alerts[i-1]:
			return invalidf("alerts", "thresholds must be ascending, and %d follows %d", a, alerts[i-1])
		}
	}
	return nil
}

// String writes s as "type:name" ("key:key_abc", "group:default"), as
// ParseBudgetSubject reads it.
func (s BudgetSubject) String() string { return s.Type + ":" + s.Name }

// ParseBudgetSubject reads "type:name"; the name may itself hold colons.
func ParseBudgetSubject(s string) (BudgetSubject, error) {
	typ, name, _ := strings.Cut(s, ":")
	sub := BudgetSubject{Type: typ, Name: name}
	if err := sub.validate(); err != nil {
		return BudgetSubject{}, fmt.Errorf("%w: subject %q: %s", ErrInvalid, s, err.Msg)
	}
	return sub, nil
}

func (s BudgetSubject) validate() *FieldError {
	switch {
	case !slices.Contains(BudgetSubjectTypes, s.Type):
		return invalidf("subject", "unknown subject type %q: want one of %s (as in key:ID or group:NAME)",
			s.Type, strings.Join(BudgetSubjectTypes, ", "))
	case s.Name == "":
		return invalidf("subject", "a %s's name is required", s.Type)
	case s.Type == "user":
		if err := ValidateEndUser(s.Name); err != nil {
			return invalidf("subject", "end user %q: %s", s.Name, strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": "))
		}
	}
	return nil
}

// ParseBudgetSpec reads an amount over a window as the CLI and the
// config write it: "50/month", "12.50/day", "100/30d".
func ParseBudgetSpec(s string) (Money, Window, error) {
	amount, window, ok := strings.Cut(s, "/")
	if !ok {
		return 0, Window{}, fmt.Errorf("%w: budget %q: want AMOUNT/WINDOW, such as 50/month or 100/30d", ErrInvalid, s)
	}
	m, err := ParseMoney(amount)
	if err != nil {
		return 0, Window{}, fmt.Errorf("budget %q: %w", s, err)
	}
	if m <= 0 {
		return 0, Window{}, fmt.Errorf("%w: budget %q: the amount must be more than 0", ErrInvalid, s)
	}
	w, err := ParseWindow(window)
	if err != nil {
		return 0, Window{}, fmt.Errorf("budget %q: %w", s, err)
	}
	return m, w, nil
}

// BudgetIDPrefix starts the ID of a budget made through the admin API or
// the CLI (keys.NewID); ConfigBudgetIDPrefix, one from the config file.
const (
	BudgetIDPrefix       = "bgt_"
	ConfigBudgetIDPrefix = "cfg:"
)

// ConfigBudgetID is the ID of the config file's budget on subject over
// window: "cfg:group:default:month". A subject has one budget per window
// length, so the ID stays the same across reloads.
func ConfigBudgetID(subject BudgetSubject, w Window) string {
	return ConfigBudgetIDPrefix + subject.String() + ":" + w.String()
}

// BudgetStore keeps the budgets set through the admin API and the CLI
// (the config file's are the catalog's), and which alerts were sent.
// storetest.ExerciseBudgets states its contract.
type BudgetStore interface {
	// BudgetCreate stores b.WithDefaults(). One that fails
	// ValidateStored is ErrInvalid; a taken ID is ErrConflict, and so is
	// a second budget of one subject over a window of the same length
	// (unit, or period): a subject may have a day's budget and a
	// month's, not two months'. Either way nothing is stored.
	BudgetCreate(ctx context.Context, b Budget) error
	// BudgetGet finds a budget by ID; none is ErrNotFound.
	BudgetGet(ctx context.Context, id string) (Budget, error)
	// BudgetList returns the budgets f selects, by subject type, subject
	// name (in byte order), then ID.
	BudgetList(ctx context.Context, f BudgetFilter) ([]Budget, error)
	// BudgetUpdate changes what p sets of budget p.ID and returns the
	// budget as stored. The last update wins unless p.IfUpdatedAt is
	// set: then a budget updated since is ErrConflict and unchanged. An
	// unknown ID is ErrNotFound; a p that fails Validate, ErrInvalid.
	BudgetUpdate(ctx context.Context, p *BudgetUpdateParams) (Budget, error)
	// BudgetDelete removes a budget and the record of its alerts; an
	// unknown ID is ErrNotFound.
	BudgetDelete(ctx context.Context, id string) error
	// BudgetAlertClaim records that p's alert is sent and reports true,
	// once per budget, window and threshold, whichever replica asks
	// first: the one that gets true sends the event. Any budget ID may
	// be claimed, the config file's too.
	BudgetAlertClaim(ctx context.Context, p *BudgetAlertClaimParams) (bool, error)
}

// BudgetFilter selects budgets for BudgetStore.BudgetList.
type BudgetFilter struct {
	// Subject, if set, is the one subject whose budgets are listed;
	// the zero subject lists every budget.
	Subject BudgetSubject
}

// BudgetUpdateParams say which budget BudgetStore.BudgetUpdate changes,
// and how: a nil field stays as it is.
type BudgetUpdateParams struct {
	// ID is the budget's; an unknown ID is ErrNotFound.
	ID     string
	Amount *Money
	Mode   *BudgetMode
	// Alerts, if not nil, replace the thresholds; an empty list ends
	// them.
	Alerts *[]int
	// At becomes the budget's UpdatedAt; the zero time is ErrInvalid.
	At time.Time
	// IfUpdatedAt, if set, makes the update a compare-and-set: it
	// applies only if the budget's UpdatedAt is still this time.
	IfUpdatedAt time.Time
}

// Validate reports what a store refuses, as a *FieldError naming the
// field: no change, a zero At, or a change Budget.Validate refuses.
func (p *BudgetUpdateParams) Validate() error {
	switch {
	case p.Amount == nil && p.Mode == nil && p.Alerts == nil:
		return invalidf("amount", "nothing to change: set an amount, a mode or alerts")
	case p.At.IsZero():
		return invalidf("updated_at", "required")
	case p.Amount != nil && *p.Amount <= 0:
		return invalidf("amount", "must be more than 0")
	case p.Mode != nil && !p.Mode.Valid():
		return invalidf("mode", "unknown mode %q: want hard, soft or shadow", *p.Mode)
	}
	if p.Alerts != nil {
		if err := validAlerts(*p.Alerts); err != nil {
			return err
		}
	}
	return nil
}

// BudgetAlertClaimParams name one alert of BudgetStore.BudgetAlertClaim:
// a budget's threshold crossed in its window starting at WindowFrom.
type BudgetAlertClaimParams struct {
	BudgetID   string
	WindowFrom time.Time
	// Threshold is in percent of the budget's amount, 1 to
	// MaxBudgetAlert.
	Threshold int
	// At is when the alert is sent.
	At time.Time
}

// Validate reports what a store refuses: no budget ID, a zero time, or a
// threshold out of range.
func (p *BudgetAlertClaimParams) Validate() error {
	switch {
	case p.BudgetID == "":
		return invalidf("budget_id", "required")
	case p.WindowFrom.IsZero() || p.At.IsZero():
		return invalidf("window_from", "the window's start and the time sent are required")
	case p.Threshold < 1 || p.Threshold > MaxBudgetAlert:
		return invalidf("threshold", "%d is not a percentage from 1 to %d", p.Threshold, MaxBudgetAlert)
	}
	return nil
}
