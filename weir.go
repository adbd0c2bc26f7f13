// Package weir holds Weir's domain: the catalog (platforms, platform models,
// public models, groups; catalog.go), API keys (key.go), usage records
// (usage.go), tasks (task.go), and the Store interfaces that the storage
// packages (sqlite, later postgres) implement (store.go). It imports
// only the standard library; everything that talks to the outside world
// lives in a subpackage and depends inward.
package weir

import "errors"

// Sentinel errors for the domain. Storage and API layers wrap them.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
	ErrInvalid  = errors.New("invalid")
)
