package weir

import "time"

// Usage is one request's record.
type Usage struct {
	RequestID        string
	KeyID            string
	Model            string
	PlatformModel    string
	Endpoint         string
	PromptTokens     int64
	CompletionTokens int64
	Waited           time.Duration
	Latency          time.Duration
	Status           int
	// Outcome is a low-cardinality word: ok, queue_timeout, queue_full,
	// upstream_error, cancelled...
	Outcome string
	At      time.Time
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
