package gateway

import (
	"errors"
	"fmt"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// The categories of the service's failures. Each is a sentinel that
// errors.Is finds in the service's errors, and its text is the API's
// stable code for it (docs/api.md, "Errors"), which is also the outcome
// label a request that ends in it is counted under. httpapi maps each to
// its status in one table.
var (
	ErrInvalid = errors.New(string(weir.CodeInvalidRequest))
	// ErrUnauthorized: the request bears no key, or not an active one.
	ErrUnauthorized = errors.New(string(weir.CodeUnauthorized))
	// ErrForbidden: the key may not do what the request asks.
	ErrForbidden = errors.New(string(weir.CodeForbidden))
	ErrNotFound  = errors.New(string(weir.CodeNotFound))
	// ErrIdempotencyKeyReused: a task submission's Idempotency-Key was
	// used before with a different request.
	ErrIdempotencyKeyReused = errors.New(string(weir.CodeIdempotencyKeyReused))
	ErrRateLimited          = errors.New(string(weir.CodeRateLimited))
	ErrQueueFull            = errors.New(string(weir.CodeQueueFull))
	// ErrBudgetExceeded: a hard budget has too little left for the
	// request; it is refused at once, never queued.
	ErrBudgetExceeded = errors.New(string(weir.CodeBudgetExceeded))
	ErrQueueTimeout   = errors.New(string(weir.CodeQueueTimeout))
	ErrNoCandidate    = errors.New(string(weir.CodeNoCandidate))
	// ErrUnservable: no candidate can serve the request as it is (a
	// parameter over what any supports); the same code as ErrNoCandidate,
	// but the client's to change, not a wait's.
	ErrUnservable      = errors.New(string(weir.CodeNoCandidate))
	ErrUpstream        = errors.New(string(weir.CodeUpstreamError))
	ErrUpstreamTimeout = errors.New(string(weir.CodeUpstreamTimeout))
	ErrInternal        = errors.New(string(weir.CodeInternal))
	// ErrUnavailable: the gateway cannot admit now (a fleet's replicas
	// cannot reach their leader or the store); nothing was done.
	ErrUnavailable = errors.New(string(weir.CodeStoreUnavailable))
)

// CodeOf is the API's code for err's category, if err is an *Error, and
// whether it is answered as the client's fault (a request no candidate
// could ever serve: no_candidate, answered 400); ok is false for any
// other error.
func CodeOf(err error) (code weir.Code, client, ok bool) {
	var e *Error
	if !errors.As(err, &e) {
		return "", false, false
	}
	switch e.Category {
	case ErrUnservable:
		return weir.CodeNoCandidate, true, true
	case ErrInvalid, ErrUnauthorized, ErrForbidden, ErrNotFound, ErrIdempotencyKeyReused, ErrRateLimited,
		ErrQueueFull, ErrBudgetExceeded, ErrQueueTimeout, ErrNoCandidate, ErrUpstream, ErrUpstreamTimeout, ErrInternal, ErrUnavailable:
		return weir.Code(e.Category.Error()), false, true
	}
	return weir.CodeInternal, false, true
}

// ErrClientGone ends a request whose client went away: nobody reads an
// answer, so none is written.
var ErrClientGone = errors.New("client disconnected")

// Error is a failure the service answers with: its category, a message
// in Weir's words for the client, the request parameter at fault, and
// for a 429 when to come back.
type Error struct {
	Category   error
	Message    string
	Param      string
	RetryAfter time.Duration
	// NoRetry: the client is to be told not to retry this on its own
	// (httpapi sends x-should-retry: false, which OpenAI's SDKs obey).
	// Set when the request said how long it would wait
	// (X-Weir-Max-Wait) and the answer comes of that: an SDK that
	// retried it silently would wait past what its caller asked for.
	NoRetry bool
	// Err is the cause, if any (not shown to the client).
	Err error
}

func (e *Error) Error() string { return e.Category.Error() + ": " + e.Message }

// Unwrap gives errors.Is and errors.As the category and the cause.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Category}
	}
	return []error{e.Category, e.Err}
}

func errorf(category error, param, msg string) *Error {
	return &Error{Category: category, Message: msg, Param: param}
}

// RefusedError is an upstream's own refusal of the client's request (a
// 4xx other than a rate limit): the client's to fix, so its answer is
// passed on as it came when it is OpenAI-shaped. A refusal of the
// platform's credential is never one (it is an ErrUpstream for the
// client, the operator's to fix).
type RefusedError struct {
	Status int
	// Body is the upstream's error body (bounded).
	Body []byte
}

func (e *RefusedError) Error() string { return fmt.Sprintf("upstream answered %d", e.Status) }

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
//
// A request that set its own max wait (asked) has said how long it
// waits, whichever limit fired first: it gets no Retry-After and is told
// not to retry (NoRetry), or an SDK would retry it after the estimate
// behind its caller's back. The status stays queue_timeout's 503: the
// gateway had no capacity in time, which is not the caller's rate limit
// (a 429 would be raised by SDKs as RateLimitError, inviting a backoff
// loop), and one code keeps one status whoever set the wait.
func queueTimeout(model string, waited time.Duration, own string, asked bool, err error) *Error {
	e := queueTimeoutAnswer(model, waited, own, err)
	if asked {
		e.RetryAfter, e.NoRetry = 0, true
	}
	return e
}

func queueTimeoutAnswer(model string, waited time.Duration, own string, err error) *Error {
	var te *admission.TimeoutError
	if !errors.As(err, &te) {
		return &Error{Category: ErrQueueTimeout, RetryAfter: minRetryAfter, Err: err,
			Message: fmt.Sprintf("waited %s for capacity on model %s", waited.Round(time.Millisecond), model)}
	}
	limit := own
	if te.Scope != "" {
		limit = weir.MaxWaitText(te.Scope, te.Value)
	}
	on := ""
	if te.WaitingOn != "" && te.WaitingOn != te.Scope {
		on = ", queued on " + weir.ScopeLabel(te.WaitingOn)
	}
	return &Error{Category: ErrQueueTimeout, RetryAfter: retryAfter(te.RetryAfter), Err: err,
		Message: fmt.Sprintf("waited %s for capacity on model %s%s: %s passed", waited.Round(time.Millisecond), model, on, limit)}
}

// queueFull is the answer to an admission.ErrQueueFull for model: it names
// the full queue and its queue_limit.
func queueFull(model string, err error) *Error {
	var qe *admission.QueueFullError
	if !errors.As(err, &qe) {
		return &Error{Category: ErrQueueFull, RetryAfter: minRetryAfter, Err: err, Message: "the queue for model " + model + " is full"}
	}
	return &Error{Category: ErrQueueFull, RetryAfter: retryAfter(qe.RetryAfter), Err: err,
		Message: weir.QueueFullText(qe.Scope, qe.Limit)}
}

// tooManyTokens is the answer to a request none of whose candidates can
// ever be admitted, its token estimate being more than a TPM limit holds:
// waiting cannot help, so it is the request's to change (docs/api.md,
// "Errors": no candidate could ever serve it, a 400).
func tooManyTokens(model string, param string, tl *admission.TokenLimitError) *Error {
	return &Error{Category: ErrInvalid, Param: param, Err: tl, Message: fmt.Sprintf(
		"this request may use up to %d tokens (its input and max_tokens), more than %s allows in a minute (tpm %d), so model %s can never serve it; ask for fewer tokens",
		tl.Tokens, weir.ScopeLabel(tl.Scope), tl.TPM, model)}
}
