package weir

import "net/http"

// Code is one of the stable error codes of Weir's API: the "code" of
// OpenAI's error shape, {"error": {"message", "type", "code", "param"}},
// which every transport answers with (docs/api.md, "Errors").
// Each code has one HTTP status and one OpenAI error type.
type Code string

const (
	CodeInvalidRequest Code = "invalid_request"
	CodeUnauthorized   Code = "unauthorized"
	CodeForbidden      Code = "forbidden"
	CodeNotFound       Code = "not_found"
	// CodeRequestTimeout: the request's body came too slowly.
	CodeRequestTimeout Code = "request_timeout"
	// CodeIdempotencyKeyReused: an Idempotency-Key already used with a
	// different request (IETF httpapi Idempotency-Key draft: 422).
	CodeIdempotencyKeyReused Code = "idempotency_key_reused"
	CodePayloadTooLarge      Code = "payload_too_large"
	CodeRateLimited          Code = "rate_limited"
	CodeQueueFull            Code = "queue_full"
	// CodeBudgetExceeded: a hard budget has too little left for the
	// request's estimated cost; Retry-After says when its window resets.
	CodeBudgetExceeded   Code = "budget_exceeded"
	CodeQueueTimeout     Code = "queue_timeout"
	CodeNoCandidate      Code = "no_candidate"
	CodeUpstreamError    Code = "upstream_error"
	CodeUpstreamTimeout  Code = "upstream_timeout"
	CodeInternal         Code = "internal_error"
	CodeStoreUnavailable Code = "store_unavailable"
)

// codeTable is the one table from code to HTTP status and OpenAI error
// type.
//
// queue_timeout is 503 whoever set the wait that passed: the gateway had
// no capacity in time, which is not the caller's rate limit (a 429 is
// raised by OpenAI's SDKs as RateLimitError, read as "slow down"), and
// one code keeps one status. What stops an SDK's silent retry of a
// request that set its own max wait is x-should-retry: false, which those
// SDKs obey whatever the status.
var codeTable = map[Code]struct {
	status int
	typ    string
}{
	CodeInvalidRequest:       {http.StatusBadRequest, "invalid_request_error"},
	CodeUnauthorized:         {http.StatusUnauthorized, "authentication_error"},
	CodeForbidden:            {http.StatusForbidden, "permission_error"},
	CodeNotFound:             {http.StatusNotFound, "not_found_error"},
	CodeRequestTimeout:       {http.StatusRequestTimeout, "invalid_request_error"},
	CodeIdempotencyKeyReused: {http.StatusUnprocessableEntity, "invalid_request_error"},
	CodePayloadTooLarge:      {http.StatusRequestEntityTooLarge, "invalid_request_error"},
	CodeRateLimited:          {http.StatusTooManyRequests, "rate_limit_error"},
	CodeQueueFull:            {http.StatusTooManyRequests, "rate_limit_error"},
	CodeBudgetExceeded:       {http.StatusTooManyRequests, "rate_limit_error"},
	CodeQueueTimeout:         {http.StatusServiceUnavailable, "server_error"},
	CodeNoCandidate:          {http.StatusServiceUnavailable, "server_error"},
	CodeUpstreamError:        {http.StatusBadGateway, "server_error"},
	CodeUpstreamTimeout:      {http.StatusGatewayTimeout, "server_error"},
	CodeInternal:             {http.StatusInternalServerError, "server_error"},
	CodeStoreUnavailable:     {http.StatusServiceUnavailable, "server_error"},
}

// Known reports whether c is one of the codes above.
func (c Code) Known() bool {
	_, ok := codeTable[c]
	return ok
}

// Status is the HTTP status for c; an unknown code is internal_error's.
func (c Code) Status() int {
	if e, ok := codeTable[c]; ok {
		return e.status
	}
	return http.StatusInternalServerError
}

// Type is OpenAI's error type for c; an unknown code is internal_error's.
func (c Code) Type() string {
	if e, ok := codeTable[c]; ok {
		return e.typ
	}
	return codeTable[CodeInternal].typ
}
