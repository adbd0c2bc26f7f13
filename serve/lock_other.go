//go:build !unix

package serve

import "context"

// lockStorage takes no lock where flock(2) is missing: run one `weir
// serve` per database there.
func lockStorage(context.Context, lockOptions) (func(), error) { return func() {}, nil }
