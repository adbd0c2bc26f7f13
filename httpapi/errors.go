package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/weir-gateway/weir/gateway"
)

// Code is a stable error code, as listed in docs/architecture.md's "Errors".
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
	CodeStoreUnavailable     Code = "store_unavailable"
)

// codeTable is the one table from code to HTTP status and OpenAI error type.
//
// queue_timeout is 503 whoever set the wait that passed: the gateway had
// no capacity in time, which is not the caller's rate limit (a 429 is
// raised by OpenAI's SDKs as RateLimitError, read as "slow down"), and
// one code keeps one status. What stops an SDK's silent retry of a
// request that set its own max wait is x-should-retry: false
// (apiError.NoRetry), which those SDKs obey whatever the status.
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
	CodeStoreUnavailable:     {http.StatusServiceUnavailable, "server_error"},
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
	// Client: the code's answer as the client's fault (400
	// invalid_request_error), where the code is otherwise the server's.
	Client bool
	// NoRetry sends x-should-retry: false, which OpenAI's SDKs obey
	// before the status and Retry-After: the request said how long it
	// waits, and a silent retry would wait past it (gateway.Error.NoRetry).
	NoRetry bool
}

// HeaderShouldRetry tells a client's SDK whether to retry an error
// answer on its own (OpenAI's and Anthropic's SDKs read it).
const HeaderShouldRetry = "X-Should-Retry"

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
	if e.Client {
		entry = codeTable[CodeInvalidRequest]
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
	if e.NoRetry {
		h.Set(HeaderShouldRetry, "false")
	}
	w.WriteHeader(entry.status)
	_ = json.NewEncoder(w).Encode(body)
}

// categoryCodes is the one table from the gateway's error categories to
// the API's codes (and so, through codeTable, to statuses).
var categoryCodes = [...]struct {
	category error
	code     Code
	client   bool // answered as the client's fault (apiError.Client)
}{
	{category: gateway.ErrInvalid, code: CodeInvalidRequest},
	{category: gateway.ErrNotFound, code: CodeNotFound},
	{category: gateway.ErrRateLimited, code: CodeRateLimited},
	{category: gateway.ErrQueueFull, code: CodeQueueFull},
	{category: gateway.ErrQueueTimeout, code: CodeQueueTimeout},
	{category: gateway.ErrNoCandidate, code: CodeNoCandidate},
	{category: gateway.ErrUnservable, code: CodeNoCandidate, client: true},
	{category: gateway.ErrUpstream, code: CodeUpstreamError},
	{category: gateway.ErrUpstreamTimeout, code: CodeUpstreamTimeout},
	{category: gateway.ErrInternal, code: CodeInternal},
	{category: gateway.ErrUnavailable, code: CodeStoreUnavailable},
}

// answerOf is the answer to err: an *apiError as it is, a gateway
// *Error under its category's code, anything else internal_error (with
// nothing of err's text shown).
func answerOf(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var ge *gateway.Error
	if errors.As(err, &ge) {
		for _, cc := range categoryCodes {
			if ge.Category == cc.category {
				return &apiError{Code: cc.code, Message: ge.Message, Param: ge.Param, RetryAfter: ge.RetryAfter, Client: cc.client, NoRetry: ge.NoRetry}
			}
		}
	}
	return errorf(CodeInternal, "", "internal error")
}

// writeErr answers err — the one way a handler's error becomes an answer
// — and returns the status written. An error that is neither the API's
// nor the gateway's is logged (the client sees only internal_error). An
// upstream's own refusal of the request is passed on as it came.
func (s *Server) writeErr(w http.ResponseWriter, r *http.Request, err error) int {
	var re *gateway.RefusedError
	if errors.As(err, &re) {
		return passUpstreamError(w, re)
	}
	e := answerOf(err)
	if e.Code == CodeInternal {
		var ge *gateway.Error
		if !errors.As(err, &ge) {
			info(r.Context()).log().Error("request failed", "error", err)
		}
	}
	writeError(w, e)
	return e.Code.Status()
}

// causeOf is the cause a gateway error wraps, or err itself.
func causeOf(err error) error {
	var ge *gateway.Error
	if errors.As(err, &ge) && ge.Err != nil {
		return ge.Err
	}
	return err
}

// handle adapts an endpoint that returns its error to an http.HandlerFunc:
// the one place where an endpoint's error is written (writeErr).
func (s *Server) handle(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeErr(w, r, err)
		}
	}
}

// passUpstreamError forwards an upstream's refusal of the client's
// request: its body when it is OpenAI-shaped JSON, else wrapped in ours.
// A 401 or 403 is the platform's credential refused, never passed on.
// It returns the status written.
func passUpstreamError(w http.ResponseWriter, re *gateway.RefusedError) int {
	if re.Status == http.StatusUnauthorized || re.Status == http.StatusForbidden {
		writeError(w, errorf(CodeUpstreamError, "", "the upstream refused the gateway's credential for it"))
		return CodeUpstreamError.Status()
	}
	var probe struct {
		Error *json.RawMessage `json:"error"`
	}
	if json.Unmarshal(re.Body, &probe) == nil && probe.Error != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(re.Status)
		_, _ = w.Write(re.Body)
		return re.Status
	}
	code := CodeInvalidRequest
	switch re.Status {
	case http.StatusNotFound:
		code = CodeNotFound
	case http.StatusRequestEntityTooLarge:
		code = CodePayloadTooLarge
	}
	e := errorf(code, "", fmt.Sprintf("upstream answered %d: %s", re.Status, bytes.TrimSpace(re.Body)))
	writeError(w, e)
	return e.Code.Status()
}
