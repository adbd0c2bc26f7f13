package weir

import (
	"fmt"
	"time"
)

// APIKey is a client credential. The secret itself is never stored: only
// its SHA-256 hash, and a short prefix to recognise it in listings.
type APIKey struct {
	ID     string
	Name   string
	Prefix string
	Hash   string // hex SHA-256 of the secret
	Group  string
	// Models, if not empty, is the allow-list of public model names.
	Models []string
	// Limits of the key's own scope (concurrency, RPM, TPM, queue limit).
	Limits
	CreatedAt time.Time
	RevokedAt time.Time // zero while active
}

// Validate reports what a store refuses in a key it is asked to create:
// no ID, Hash or CreatedAt, or negative limits.
func (k APIKey) Validate() error {
	if k.ID == "" || k.Hash == "" || k.CreatedAt.IsZero() {
		return fmt.Errorf("%w: id, hash and creation time are required", ErrInvalid)
	}
	return k.Limits.Validate()
}

// Active reports whether the key may be used.
func (k APIKey) Active() bool { return k.RevokedAt.IsZero() }

// Allows reports whether the key may use a public model.
func (k APIKey) Allows(model string) bool {
	if len(k.Models) == 0 {
		return true
	}
	for _, m := range k.Models {
		if m == model {
			return true
		}
	}
	return false
}
