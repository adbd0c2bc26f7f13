package weir

import (
	"fmt"
	"time"
)

// Usage is one request's record.
type Usage struct {
	RequestID string
	KeyID     string
	// Group is the key's group when the request was made.
	Group         string
	Model         string
	PlatformModel string
	Endpoint      string
	// EndUser is the end user the request named (its user, safety
	// identifier or metadata.user_id; ValidateEndUser holds it), "" none.
	EndUser          string
	PromptTokens     int64
	CompletionTokens int64
	// CachedTokens are the prompt tokens read from the provider's prompt
	// cache (a part of PromptTokens).
	CachedTokens int64
	// Cost is what the request cost at its platform model's (or node
	// provider's) price. CostEstimated: the upstream reported no usage,
	// so Cost is priced from the request's estimate.
	Cost          Money
	CostEstimated bool
	Waited        time.Duration
	Latency       time.Duration
	Status        int
	// Outcome is a low-cardinality word: ok, queue_timeout, queue_full,
	// upstream_error, cancelled...
	Outcome string
	// Handoff, if set, says the request left a candidate for the next
	// one in a way an operator should see: "stalled node:<node>/<provider>"
	// for an edge node's run that stalled (ErrNodeStalled) before any of
	// its answer reached the client; several are joined by ", ".
	Handoff string
	At      time.Time
}

// Validate reports what a store refuses in a record: no RequestID, KeyID
// or At, or a negative Cost.
func (u Usage) Validate() error {
	switch {
	case u.RequestID == "" || u.KeyID == "" || u.At.IsZero():
		return fmt.Errorf("%w: request id, key id and time are required", ErrInvalid)
	case u.Cost < 0:
		return fmt.Errorf("%w: negative cost %s", ErrInvalid, u.Cost)
	}
	if err := ValidateEndUser(u.EndUser); err != nil {
		return fmt.Errorf("end user: %w", err)
	}
	return nil
}

// KeyUsage sums one key's usage records: its requests, those whose
// outcome was not ok, the tokens they used, and when the last was.
type KeyUsage struct {
	KeyID                    string
	Requests, Failed, Tokens int64
	Last                     time.Time
}

// UsageFilter selects usage records.
type UsageFilter struct {
	KeyID string
	Since time.Time
	Limit int
}

// Validate reports what a store refuses in a listing's filter: a
// negative Limit.
func (f UsageFilter) Validate() error {
	if f.Limit < 0 {
		return fmt.Errorf("%w: negative limit %d", ErrInvalid, f.Limit)
	}
	return nil
}
