package weir

import (
	"context"
	"fmt"
	"time"
)

// ResponseBinding ties a response that a platform speaking OpenAI's
// Responses API made (and keeps) to that platform and to the key whose
// request made it: a request that continues it (previous_response_id)
// can only be served there, and only that key may retrieve, delete or
// cancel it. Bindings are stored, so that they hold across restarts and
// on every replica of a fleet.
type ResponseBinding struct {
	// ResponseID is the platform's id of the response ("resp_…").
	ResponseID string
	Platform   string
	KeyID      string
	// CreatedAt is when it was bound; past ExpiresAt it is as if it had
	// never been.
	CreatedAt, ExpiresAt time.Time
}

// ResponseBindingTTL is how long a binding is kept: as long as OpenAI
// keeps a stored response.
const ResponseBindingTTL = 30 * 24 * time.Hour

// Validate reports what a store refuses: a binding without its id,
// platform, key or times, or one that expires before it was made.
func (b ResponseBinding) Validate() error {
	switch {
	case b.ResponseID == "":
		return invalidf("response_id", "required")
	case b.Platform == "":
		return invalidf("platform", "required")
	case b.KeyID == "":
		return invalidf("key_id", "required")
	case b.CreatedAt.IsZero():
		return invalidf("created_at", "required")
	case !b.ExpiresAt.After(b.CreatedAt):
		return invalidf("expires_at", "must be after created_at")
	}
	return nil
}

// ResponseBindingGetParams say which binding ResponseStore.ResponseBindingGet
// finds.
type ResponseBindingGetParams struct {
	ResponseID string
	// Now: a binding that expired by then is not found.
	Now time.Time
}

// ResponseStore keeps the response bindings. storetest.ExerciseResponses
// states its contract.
type ResponseStore interface {
	// ResponseBind stores b, in place of a binding of the same
	// ResponseID. A b that fails Validate is ErrInvalid, and nothing is
	// stored.
	ResponseBind(ctx context.Context, b ResponseBinding) error
	// ResponseBindingGet finds the binding of p.ResponseID, unless it
	// expired by p.Now; ErrNotFound if there is none.
	ResponseBindingGet(ctx context.Context, p *ResponseBindingGetParams) (ResponseBinding, error)
	// ResponseUnbind removes the binding of id; none is not an error.
	ResponseUnbind(ctx context.Context, id string) error
	// ResponseBindingsPurge removes up to p.Limit bindings that expired
	// by p.ExpiredBy, the earliest expired first, and returns how many it
	// removed; call it again while it returns p.Limit. The reads ignore
	// an expired binding whether or not it was purged: the purge only
	// keeps the table small, off the path of each bind.
	ResponseBindingsPurge(ctx context.Context, p *ResponseBindingsPurgeParams) (int, error)
}

// ResponseBindingsPurgeParams say which bindings
// ResponseStore.ResponseBindingsPurge removes.
type ResponseBindingsPurgeParams struct {
	// ExpiredBy: only bindings whose ExpiresAt is not after it go; the
	// zero time is ErrInvalid.
	ExpiredBy time.Time
	// Limit is the most bindings one call removes; it must be positive
	// (ErrInvalid otherwise).
	Limit int
}

// Validate reports what a store refuses: a zero ExpiredBy, or a Limit
// that is not positive.
func (p *ResponseBindingsPurgeParams) Validate() error {
	if p.ExpiredBy.IsZero() || p.Limit <= 0 {
		return fmt.Errorf("%w: a time and a positive limit are required", ErrInvalid)
	}
	return nil
}
