package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// Code is a stable error code, as listed in DESIGN.md's "Errors".
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
	CodeQueueTimeout         Code = "queue_timeout"
	CodeNoCandidate          Code = "no_candidate"
	CodeUpstreamError        Code = "upstream_error"
	CodeUpstreamTimeout      Code = "upstream_timeout"
	CodeInternal             Code = "internal_error"
)

// codeTable is the one table from code to HTTP status and OpenAI error type.
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
	CodeQueueTimeout:         {http.StatusServiceUnavailable, "server_error"},
	CodeNoCandidate:          {http.StatusServiceUnavailable, "server_error"},
	CodeUpstreamError:        {http.StatusBadGateway, "server_error"},
	CodeUpstreamTimeout:      {http.StatusGatewayTimeout, "server_error"},
	CodeInternal:             {http.StatusInternalServerError, "server_error"},
}

// Status is the HTTP status for c.
func (c Code) Status() int {
	if e, ok := codeTable[c]; ok {
		return e.status
	}
	return http.StatusInternalServerError
}

// apiError is an error answer: a code, a message, the offending parameter
// and, for 429s, when to come back.
type apiError struct {
	Code       Code
	Message    string
	Param      string
	RetryAfter time.Duration
}

func (e *apiError) Error() string { return string(e.Code) + ": " + e.Message }

func errorf(code Code, param, msg string) *apiError {
	return &apiError{Code: code, Message: msg, Param: param}
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Code    string  `json:"code"`
	Param   *string `json:"param"`
}

// writeError writes e in OpenAI's error shape.
func writeError(w http.ResponseWriter, e *apiError) {
	entry, ok := codeTable[e.Code]
	if !ok {
		entry = codeTable[CodeInternal]
	}
	body := errorBody{Error: errorDetail{Message: e.Message, Type: entry.typ, Code: string(e.Code)}}
	if e.Param != "" {
		body.Error.Param = &e.Param
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.RetryAfter > 0 {
		secs := int64((e.RetryAfter + time.Second - 1) / time.Second)
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	w.WriteHeader(entry.status)
	_ = json.NewEncoder(w).Encode(body)
}

// Retry-After bounds for the engine's wait estimates: at least a second
// (an estimate of zero means the engine had nothing to go on), at most a
// minute, so that a client comes back to a queue that has moved, and no
// guess from a few long holds keeps it away for long.
const (
	minRetryAfter = time.Second
	maxRetryAfter = time.Minute
)

func retryAfter(estimate time.Duration) time.Duration {
	return min(max(estimate, minRetryAfter), maxRetryAfter)
}

// queueTimeout is the answer to a wait that ended in err (an
// admission.ErrTimeout) after waited, for model. It names the limit that
// fired: a scope's max_wait, or the request's own deadline, which own
// describes ("the request's own max wait (X-Weir-Max-Wait 500ms)").
// Retry-After is the engine's wait estimate for the scope the request
// waited on.
func queueTimeout(model string, waited time.Duration, own string, err error) *apiError {
	var te *admission.TimeoutError
	if !errors.As(err, &te) {
		return &apiError{Code: CodeQueueTimeout, RetryAfter: minRetryAfter,
			Message: fmt.Sprintf("waited %s for capacity on model %s", waited.Round(time.Millisecond), model)}
	}
	limit := own
	if te.Scope != "" {
		limit = fmt.Sprintf("%s's max_wait (%s)", weir.ScopeLabel(te.Scope), te.Value)
	}
	on := ""
	if te.WaitingOn != "" && te.WaitingOn != te.Scope {
		on = ", queued on " + weir.ScopeLabel(te.WaitingOn)
	}
	return &apiError{Code: CodeQueueTimeout, RetryAfter: retryAfter(te.RetryAfter),
		Message: fmt.Sprintf("waited %s for capacity on model %s%s: %s passed", waited.Round(time.Millisecond), model, on, limit)}
}

// queueFull is the answer to an admission.ErrQueueFull for model: it names
// the full queue and its queue_limit.
func queueFull(model string, err error) *apiError {
	var qe *admission.QueueFullError
	if !errors.As(err, &qe) {
		return &apiError{Code: CodeQueueFull, RetryAfter: minRetryAfter, Message: "the queue for model " + model + " is full"}
	}
	return &apiError{Code: CodeQueueFull, RetryAfter: retryAfter(qe.RetryAfter),
		Message: fmt.Sprintf("the queue of %s is full (queue_limit %d)", weir.ScopeLabel(qe.Scope), qe.Limit)}
}

// tooManyTokens is the answer to a request none of whose candidates can
// ever be admitted, its token estimate being more than a TPM limit holds:
// waiting cannot help, so it is the request's to change (DESIGN.md,
// "Errors": no candidate could ever serve it, a 400).
func tooManyTokens(model string, param string, tl *admission.TokenLimitError) *apiError {
	return errorf(CodeInvalidRequest, param, fmt.Sprintf(
		"this request may use up to %d tokens (its input and max_tokens), more than %s allows in a minute (tpm %d), so model %s can never serve it; ask for fewer tokens",
		tl.Tokens, weir.ScopeLabel(tl.Scope), tl.TPM, model))
}
