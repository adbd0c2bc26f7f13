package weir

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// An Override is what was set at run time for one scope, beside what the
// catalog says: an operator's drain of a platform model or limit on a
// scope, or the pause an upstream asked for with a Retry-After. The store
// keeps them, so that every replica of a fleet applies and reports the
// same ones whichever replica set them, and a reload anywhere keeps what
// it must keep (gateway/operator.go says what each lasts for).
type Override struct {
	// Scope is the scope's name (PlatformModelScope, GroupScope,
	// KeyScope); a drain's and a pause's are platform models'.
	Scope string
	Kind  OverrideKind
	// Limit is an OverrideLimit's concurrent limit (0: unlimited); 0 for
	// the other kinds.
	Limit int64
	// Until ends an OverridePause; zero for the other kinds, which last
	// until they are lifted.
	Until time.Time
	// SetAt is when it was set.
	SetAt time.Time
}

// OverrideKind is what an Override does.
type OverrideKind string

const (
	// OverrideDrain: the platform model admits nothing until lifted.
	OverrideDrain OverrideKind = "drain"
	// OverrideLimit: the scope's concurrent limit is Limit, not the
	// catalog's.
	OverrideLimit OverrideKind = "limit"
	// OverridePause: the platform model admits nothing until Until.
	OverridePause OverrideKind = "pause"
)

// Valid reports whether k is a known kind.
func (k OverrideKind) Valid() bool {
	return k == OverrideDrain || k == OverrideLimit || k == OverridePause
}

// Validate reports what a store refuses: a *FieldError (matching
// ErrInvalid) naming the first field at fault.
func (o Override) Validate() error {
	drainable := strings.HasPrefix(o.Scope, pmScopePrefix)
	switch {
	case o.Scope == "":
		return invalidf("scope", "required")
	case !o.Kind.Valid():
		return invalidf("kind", "unknown kind %q: want drain, limit or pause", o.Kind)
	case o.Kind != OverrideLimit && !drainable:
		return invalidf("scope", "a %s is a platform model's, not %s's", o.Kind, o.Scope)
	case o.Limit < 0:
		return invalidf("limit", "must be 0 (unlimited) or more, not %d", o.Limit)
	case o.Kind != OverrideLimit && o.Limit != 0:
		return invalidf("limit", "only a limit has one")
	case o.Kind == OverridePause && o.Until.IsZero():
		return invalidf("until", "a pause needs its end")
	case o.Kind != OverridePause && !o.Until.IsZero():
		return invalidf("until", "only a pause ends by itself")
	case o.SetAt.IsZero():
		return invalidf("set_at", "required")
	}
	return nil
}

// OverrideDeleteParams select the overrides OverrideStore.OverrideDelete
// removes.
type OverrideDeleteParams struct {
	// Kind is required.
	Kind OverrideKind
	// Scope, if set, is the one scope whose override goes; "": every
	// scope's of Kind.
	Scope string
	// EndedBy, if set, removes only overrides whose Until is set and not
	// after it (pauses that are over).
	EndedBy time.Time
}

// Validate reports what a store refuses: a Kind that is not valid.
func (p *OverrideDeleteParams) Validate() error {
	if !p.Kind.Valid() {
		return fmt.Errorf("%w: unknown kind %q", ErrInvalid, p.Kind)
	}
	return nil
}

// OverrideStore keeps the overrides. storetest.ExerciseOverrides states
// its contract.
type OverrideStore interface {
	// OverrideSet stores o, in place of the scope's override of its kind
	// if there is one, except that a pause is only ever extended: a pause
	// stored with a later Until stays as it is. An o that fails Validate
	// is ErrInvalid, and nothing is stored.
	OverrideSet(ctx context.Context, o Override) error
	// OverrideList returns every override, by Scope in byte order, then
	// Kind.
	OverrideList(ctx context.Context) ([]Override, error)
	// OverrideDelete removes the overrides p selects and says how many it
	// removed; none is not an error. A p without a valid Kind is
	// ErrInvalid.
	OverrideDelete(ctx context.Context, p *OverrideDeleteParams) (int, error)
}
