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
// name) at From or later and before Until.
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
	}
	return validWindow(f.From, f.Until)
}

// SpendBuckets are the buckets of time SpendReport may sum by, each
// starting at its UTC hour, day, week (from Monday) or month: "" sums
// the whole window in one.
var SpendBuckets = []string{"", "hour", "day", "week", "month"}

// SpendReportFilter says what SpendStore.SpendReport sums: usage in
// [From, Until), by By (one of BudgetSubjectTypes) and by Bucket (one of
// SpendBuckets).
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
	// Subject is the key's id, or the group's, model's or platform
	// model's name.
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
