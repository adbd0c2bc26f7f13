package weir

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// SpendStore sums what requests cost, from their usage records.
// storetest.ExerciseSpend states its contract.
type SpendStore interface {
	// SpendSum is the cost of the usage of f.Subject in [f.From,
	// f.Until).
	SpendSum(ctx context.Context, f SpendFilter) (Money, error)
	// SpendReport sums cost, requests and tokens by subject (and by
	// bucket of time, if asked) in [f.From, f.Until).
	SpendReport(ctx context.Context, f SpendReportFilter) ([]SpendRow, error)
}

// SpendFilter selects the usage whose cost SpendStore.SpendSum sums: a
// subject's (a key by id, a group, a public model or a platform model by
// name, an end user by id) at From or later and before Until. "user:*"
// names no one end user: it is ErrInvalid.
type SpendFilter struct {
	Subject     BudgetSubject
	From, Until time.Time
}

// Validate reports what a store refuses: an unknown subject type, no
// subject name, or no window (a zero From or Until, or Until not after
// From).
func (f SpendFilter) Validate() error {
	switch {
	case !slices.Contains(BudgetSubjectTypes, f.Subject.Type):
		return fmt.Errorf("%w: unknown subject type %q: want one of %v", ErrInvalid, f.Subject.Type, BudgetSubjectTypes)
	case f.Subject.Name == "":
		return fmt.Errorf("%w: no %s named", ErrInvalid, f.Subject.Type)
	case f.Subject.EveryEndUser():
		return fmt.Errorf("%w: user:* is every end user apart, not one to sum", ErrInvalid)
	}
	return validWindow(f.From, f.Until)
}

// SpendBuckets are the buckets of time SpendReport may sum by, each
// starting at its UTC hour, day, week (from Monday) or month: "" sums
// the whole window in one.
var SpendBuckets = []string{"", "hour", "day", "week", "month"}

// SpendReportFilter says what SpendStore.SpendReport sums: usage in
// [From, Until), by By (one of BudgetSubjectTypes) and by Bucket (one of
// SpendBuckets). By "user" sums the requests that named an end user, by
// end user; those that named none are left out.
type SpendReportFilter struct {
	By          string
	From, Until time.Time
	Bucket      string
}

// Validate reports what a store refuses: an unknown By or Bucket, or no
// window.
func (f SpendReportFilter) Validate() error {
	switch {
	case !slices.Contains(BudgetSubjectTypes, f.By):
		return fmt.Errorf("%w: unknown subject type %q: want one of %v", ErrInvalid, f.By, BudgetSubjectTypes)
	case !slices.Contains(SpendBuckets, f.Bucket):
		return fmt.Errorf("%w: unknown bucket %q: want hour, day, week, month or none", ErrInvalid, f.Bucket)
	}
	return validWindow(f.From, f.Until)
}

func validWindow(from, until time.Time) error {
	if from.IsZero() || until.IsZero() || !until.After(from) {
		return fmt.Errorf("%w: a window from a time until a later one is required", ErrInvalid)
	}
	return nil
}

// SpendRow is one subject's spend in one bucket of time.
type SpendRow struct {
	// Subject is the key's id, the group's, model's or platform model's
	// name, or the end user's id.
	Subject string
	// Bucket is when its bucket starts (UTC); with no bucket, the
	// report's From.
	Bucket time.Time
	// Requests counts its usage records, Tokens their prompt and
	// completion tokens, Cost their cost (saturating), Estimated those
	// whose cost is an estimate.
	Requests, Tokens int64
	Cost             Money
	Estimated        int64
}

// OutcomeInterrupted is the outcome of a usage record made from a
// reservation whose request ended without one (its process died):
// Store.SpendRecover writes it, at the reservation's estimate.
const OutcomeInterrupted = "interrupted"

// Reservation is the estimated cost of a request admitted and not yet
// ended, kept in the store's spend journal until the request's usage
// record settles it (Store.UsageInsert) or, if the request never gets
// one, until Store.SpendRecover counts it at its estimate.
type Reservation struct {
	RequestID string
	KeyID     string
	// Group is the key's group when the request was made.
	Group         string
	Model         string
	PlatformModel string
	// EndUser is the end user the request named, "" none.
	EndUser string
	// Estimate is what the request reserved: its estimated cost.
	Estimate Money
	// At is when the request was admitted; a recovered reservation's
	// usage record has this time, so it counts in the window it was
	// spent in.
	At time.Time
}

// Validate reports what a store refuses in a reservation: no RequestID,
// KeyID or At, or a negative Estimate.
func (r Reservation) Validate() error {
	switch {
	case r.RequestID == "" || r.KeyID == "" || r.At.IsZero():
		return fmt.Errorf("%w: request id, key id and time are required", ErrInvalid)
	case r.Estimate < 0:
		return fmt.Errorf("%w: negative estimate %s", ErrInvalid, r.Estimate)
	}
	if err := ValidateEndUser(r.EndUser); err != nil {
		return fmt.Errorf("end user: %w", err)
	}
	return nil
}

// SpendRecoverParams say which reservations Store.SpendRecover counts.
type SpendRecoverParams struct {
	// Before: only reservations made before it (their At) are counted;
	// the zero time is ErrInvalid.
	Before time.Time
	// Limit is the most reservations one call counts, oldest first; it
	// must be positive (ErrInvalid otherwise). A call that counts Limit
	// may have left more.
	Limit int
}

// Validate reports what a store refuses: a zero Before, or a Limit that
// is not positive.
func (p *SpendRecoverParams) Validate() error {
	if p.Before.IsZero() || p.Limit <= 0 {
		return fmt.Errorf("%w: a time and a positive limit are required", ErrInvalid)
	}
	return nil
}
