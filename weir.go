// Package weir holds Weir's domain: the catalog (platforms, platform models,
// public models, groups; catalog.go), API keys (key.go), edge nodes and
// their tokens (node.go), usage records (usage.go), tasks (task.go), the
// API's error codes (errcode.go), and the Store interfaces that the
// storage packages (sqlite, postgres) implement (store.go). It imports only the standard library; everything
// that talks to the outside world lives in a subpackage and depends
// inward.
package weir

import (
	"errors"
	"fmt"
)

// Sentinel errors for the domain. Storage and API layers wrap them.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
	ErrInvalid  = errors.New("invalid")
)

// FieldError is a problem with one field of an entity, named by its path
// as the config file writes it ("platform_models[1].platform",
// "server.listen"). It matches ErrInvalid.
type FieldError struct {
	Path string
	Msg  string
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Msg }
func (e *FieldError) Unwrap() error { return ErrInvalid }

// within is e for the same field of an entity found at path.
func (e *FieldError) within(path string) *FieldError {
	return &FieldError{Path: path + "." + e.Path, Msg: e.Msg}
}

func invalidf(path, format string, args ...any) *FieldError {
	return &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)}
}
