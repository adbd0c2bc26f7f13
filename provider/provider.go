// Package provider holds the upstream adapters: how Weir sends one call to
// one platform. The OpenAI adapter speaks any OpenAI-compatible API and
// passes bodies and streams through as they arrive; provider/mock is the
// mock provider that tests, benchmarks and the demo run against.
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
	"strings"
	"time"
)

// Call is one upstream request: an endpoint path under the platform's base
// URL ("/chat/completions") and the JSON body, model already rewritten.
type Call struct {
	Path   string
	Body   []byte
	Stream bool
	// Header carries client headers worth forwarding (Accept, User-Agent).
	Header http.Header
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
	Err        error
}

func (e *Error) Error() string {
	switch {
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
// server errors, connect errors and timeouts. Other 4xx answers are the
// client's to fix and go back to it as they are.
func (e *Error) Retryable() bool {
	return e.Status == 0 || e.Status == http.StatusTooManyRequests || e.Status == http.StatusRequestTimeout || e.Status >= 500
}

// OpenAI is the adapter for OpenAI-compatible APIs.
type OpenAI struct {
	BaseURL string // e.g. https://api.openai.com/v1
	APIKey  string
	Client  *http.Client
	// Timeout bounds the wait for response headers (0: none beyond ctx).
	Timeout time.Duration
}

var _ Adapter = (*OpenAI)(nil)

const maxErrorBody = 64 << 10

// Do sends c and returns the response when the upstream answers 2xx.
func (o *OpenAI) Do(ctx context.Context, c Call) (*http.Response, error) {
	h := http.Header{"Content-Type": {"application/json"}}
	if c.Stream {
		h.Set("Accept", "text/event-stream")
	} else if a := c.Header.Get("Accept"); a != "" {
		h.Set("Accept", a)
	}
	if ua := c.Header.Get("User-Agent"); ua != "" {
		h.Set("User-Agent", ua)
	}
	req, err := newRequest(ctx, http.MethodPost, o.BaseURL, c.Path, o.APIKey, c.Body, h)
	if err != nil {
		return nil, err
	}
	resp, err := doWithHeaderTimeout(ctx, httpClient(o.Client), req, o.Timeout)
	if err != nil {
		return nil, err
	}
	return checkStatus(resp)
}

// newRequest is a request to path under base (its trailing slash
// dropped), with the API key as a bearer token and the headers h.
func newRequest(ctx context.Context, method, base, path, apiKey string, body []byte, h http.Header) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(base, "/")+path, rd)
	if err != nil {
		return nil, &Error{Err: err}
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	return req, nil
}

func httpClient(c *http.Client) *http.Client {
	if c != nil {
		return c
	}
	return http.DefaultClient
}

// doWithHeaderTimeout sends req (made with ctx) and returns the answer,
// whatever its status, or an *Error (or ctx's error if the caller went
// away). timeout, if positive, bounds the wait for the response headers
// only: a stream or a large body may take longer. Closing the body
// releases what the bound holds.
func doWithHeaderTimeout(ctx context.Context, c *http.Client, req *http.Request, timeout time.Duration) (*http.Response, error) {
	if timeout <= 0 {
		resp, err := c.Do(req)
		if err != nil {
			return nil, classify(ctx, err)
		}
		return resp, nil
	}
	hctx, cancel := context.WithCancel(ctx)
	t := time.AfterFunc(timeout, cancel)
	resp, err := c.Do(req.WithContext(hctx))
	if !t.Stop() {
		if resp != nil {
			resp.Body.Close()
		}
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &Error{Timeout: true, Err: fmt.Errorf("no response headers within %s", timeout)}
	}
	if err != nil {
		cancel()
		return nil, classify(ctx, err)
	}
	resp.Body = cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

func classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err() // the client went away: not the upstream's fault
	}
	var ne net.Error
	timeout := errors.As(err, &ne) && ne.Timeout()
	return &Error{Timeout: timeout || errors.Is(err, context.DeadlineExceeded), Err: err}
}

func checkStatus(resp *http.Response) (*http.Response, error) {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &Error{Status: resp.StatusCode, Body: body}
	// retry-after-ms, which OpenAI sends beside Retry-After and its SDKs
	// read first, is exact where Retry-After is whole seconds.
	if ms, err := strconv.ParseFloat(resp.Header.Get("Retry-After-Ms"), 64); err == nil && ms >= 0 {
		e.RetryAfter = time.Duration(ms * float64(time.Millisecond))
	} else if secs, err := strconv.ParseFloat(resp.Header.Get("Retry-After"), 64); err == nil && secs >= 0 {
		e.RetryAfter = time.Duration(secs * float64(time.Second))
	}
	return nil, e
}
