// Package provider holds the upstream adapters: how Weir sends one call to
// one platform. The OpenAI adapter speaks any OpenAI-compatible API and
// passes bodies and streams through as they arrive; provider/mock is the
// mock provider that tests, benchmarks and the demo run against, and
// provider/simulate answers the simulation run mode with it in process.
package provider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Call is one upstream request: an endpoint path under the platform's base
// URL ("/chat/completions", a query allowed) and the JSON body, model
// already rewritten (none for a GET or a DELETE).
type Call struct {
	// Method is the HTTP method; "": POST.
	Method string
	Path   string
	Body   []byte
	// Upload, if set, is sent instead of Body: a multipart form, read as
	// it goes out. The OpenAI adapter sends it; adapters of platforms
	// that take no uploads refuse the call's path.
	Upload *Upload
	Stream bool
	// Header carries client headers worth forwarding (Accept, User-Agent).
	Header http.Header
}

// Upload is a call's body read as it is sent (a multipart form with its
// files), not held whole.
type Upload struct {
	// Body is the form. The adapter may read it; the caller closes it
	// once Do has returned, whether or not it was read to its end.
	Body io.ReadCloser
	// ContentType is its type, boundary included.
	ContentType string
	// Length is its length in bytes; -1: unknown (sent chunked).
	Length int64
	// Model is the form's model, the platform's name for it (where the
	// platform routes by model outside the body: Azure's deployment).
	Model string
}

// Adapter sends calls to one platform.
type Adapter interface {
	// Do returns the upstream response for a 2xx answer, or an *Error.
	// The caller closes the body.
	Do(ctx context.Context, c Call) (*http.Response, error)
}

// Error is an upstream failure, classified for fallback.
type Error struct {
	// Status is the upstream HTTP status; 0 for connect errors and timeouts.
	Status int
	// Body is the upstream's error body (bounded), passed to the client for
	// non-retryable 4xx answers.
	Body []byte
	// RetryAfter is the upstream's Retry-After, if any.
	RetryAfter time.Duration
	Timeout    bool
	// Credential marks the platform refusing its own credential: a 401
	// or 403, or an error that names the key or complains about it. Its
	// Body is dropped (it may quote the key) and Error says so in Weir's
	// words: it is the operator's to fix, never the client's to see.
	Credential bool
	// Overloaded marks a passing overload of the upstream's own
	// (Anthropic's 529 overloaded_error): retryable like any server
	// error, and it pauses the platform model as a 429 does (Pauses).
	Overloaded bool
	// Redirect is where an upstream redirected a call that is not
	// followed (CheckRedirect): the operator's to fix, like Credential.
	Redirect string
	Err      error
}

func (e *Error) Error() string {
	switch {
	case e.Credential:
		return fmt.Sprintf("the platform refused its credential (upstream answered %d)", e.Status)
	case e.Redirect != "":
		return fmt.Sprintf("upstream answered %d, a redirect to %s, which Weir does not follow for this call: point the platform's base_url there", e.Status, e.Redirect)
	case e.Timeout:
		return fmt.Sprintf("upstream timeout: %v", e.Err)
	case e.Status == 0:
		return fmt.Sprintf("upstream unreachable: %v", e.Err)
	default:
		return fmt.Sprintf("upstream answered %d: %s", e.Status, bytes.TrimSpace(e.Body))
	}
}

func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether another candidate should be tried: rate limits,
// server errors, connect errors, timeouts, a refused platform credential
// and a redirect not followed. Other 4xx answers are the client's to fix
// and go back to it as they are.
func (e *Error) Retryable() bool {
	return e.Credential || e.Redirect != "" || e.Status == 0 || e.Status == http.StatusTooManyRequests || e.Status == http.StatusRequestTimeout || e.Status >= 500
}

// Pauses reports whether the upstream said it takes no more calls for a
// while, and for how long: a 429, or a passing overload, with a
// RetryAfter. The platform model pauses for that long.
func (e *Error) Pauses() bool {
	return (e.Status == http.StatusTooManyRequests || e.Overloaded) && e.RetryAfter > 0
}

// newRequest is a request to path under base (its trailing slash
// dropped), with the API key as a bearer token and the headers h.
func newRequest(ctx context.Context, method, base, path, apiKey string, body []byte, h http.Header) (*http.Request, error) {
	t, err := targetOf(base, path)
	if err != nil {
		return nil, &Error{Err: err}
	}
	return requestTo(ctx, method, t, apiKey, body, h)
}

// requestTo is newRequest of a target already found.
func requestTo(ctx context.Context, method string, t *target, apiKey string, body []byte, h http.Header) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	// An empty URL parses to an empty one, which the target's fills:
	// the request is NewRequestWithContext's for the joined URL.
	req, err := http.NewRequestWithContext(ctx, method, "", rd)
	if err != nil {
		return nil, &Error{Err: err}
	}
	*req.URL, req.Host = t.url, t.host
	for k, vs := range h {
		req.Header[k] = vs
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	return req, nil
}

// setPassedOn sets in h the headers of a call whose body is passed on:
// JSON (if it has a body), an event stream accepted for a stream and else
// what the client accepts, and the client's User-Agent. h is the
// caller's so that it may stay on the stack.
//
// The values are shared, not copied: the fixed ones with every call, the
// client's with its request, whose headers outlive the call. Nothing
// changes a header's values in place (Header.Set and Add replace the
// slice), and the transport only reads the request's headers.
func setPassedOn(h http.Header, c *Call) {
	if c.Body != nil {
		h["Content-Type"] = jsonContentType
	}
	if c.Stream {
		h["Accept"] = eventStreamAccept
	} else if a := firstValue(c.Header, "Accept"); a != nil {
		h["Accept"] = a
	}
	if ua := firstValue(c.Header, "User-Agent"); ua != nil {
		h["User-Agent"] = ua
	}
}

var (
	jsonContentType   = []string{"application/json"}
	eventStreamAccept = []string{"text/event-stream"}
)

// firstValue is h's first value of key (in its canonical form), as a
// slice of its own, or nil if that is "": what Header.Set(key,
// h.Get(key)) would set, without a copy where key has one value.
func firstValue(h http.Header, key string) []string {
	vs := h[key]
	switch {
	case len(vs) == 0 || vs[0] == "":
		return nil
	case len(vs) > 1:
		return []string{vs[0]}
	}
	return vs[:1:1]
}

func httpClient(c *http.Client) *http.Client {
	if c != nil {
		return c
	}
	return http.DefaultClient
}

func classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err() // the client went away: not the upstream's fault
	}
	var pe *Error
	if errors.As(err, &pe) {
		return pe // the policy's refusal of a redirect, under http.Client's *url.Error
	}
	var ne net.Error
	timeout := errors.As(err, &ne) && ne.Timeout()
	return &Error{Timeout: timeout || errors.Is(err, context.DeadlineExceeded), Err: err}
}

// maxErrorBody bounds what is read of an upstream error answer.
const maxErrorBody = 64 << 10

// checkStatus passes a 2xx answer on and turns any other into an *Error,
// its body read (bounded) and the connection given back. apiKey is the
// credential the call sent, to recognize an error that quotes it.
func checkStatus(resp *http.Response, apiKey string) (*http.Response, error) {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &Error{Status: resp.StatusCode, Body: body}
	if credentialComplaint(resp.StatusCode, body, apiKey) {
		e.Credential, e.Body = true, nil
	}
	e.RetryAfter, _ = retryAfterOf(resp.Header)
	return nil, e
}

// retryAfterOf is an answer's Retry-After, if it has one. retry-after-ms,
// which OpenAI and Anthropic send beside Retry-After and their SDKs read
// first, is exact where Retry-After is whole seconds.
func retryAfterOf(h http.Header) (time.Duration, bool) {
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms >= 0 {
		return time.Duration(ms * float64(time.Millisecond)), true
	}
	if secs, err := strconv.ParseFloat(h.Get("Retry-After"), 64); err == nil && secs >= 0 {
		return time.Duration(secs * float64(time.Second)), true
	}
	return 0, false
}

// credentialComplaint reports whether an upstream's error is about the
// platform's credential: a 401 or 403, an answer that quotes the key, or
// an error whose code, type or message is about an API key or
// authentication (some platforms answer a bad key with 400).
func credentialComplaint(status int, body []byte, apiKey string) bool {
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		return true
	}
	if len(apiKey) >= 8 && bytes.Contains(body, []byte(apiKey)) {
		return true
	}
	lower := bytes.ToLower(body)
	for _, w := range credentialWords {
		if bytes.Contains(lower, []byte(w)) {
			return true
		}
	}
	return false
}

// credentialWords are what a credential complaint says, lower-cased:
// OpenAI's codes and types and the usual phrasings of other platforms.
var credentialWords = []string{
	"invalid_api_key", "authentication_error", "permission_error",
	"api key", "api_key", "api-key", "apikey", "credential", "unauthorized", "unauthenticated",
}

// CheckStatus passes a 2xx answer on and turns any other into an *Error,
// as an adapter does: its body read (bounded), Retry-After taken. For
// executors that get an upstream's answer by another way than HTTP (an
// edge node's tunnel).
func CheckStatus(resp *http.Response) (*http.Response, error) { return checkStatus(resp, "") }

// method is c's HTTP method.
func (c Call) method() string {
	if c.Method == "" {
		return http.MethodPost
	}
	return c.Method
}
