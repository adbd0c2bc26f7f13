package provider

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/tracing"
)

// Bounds limit one upstream call in time. A zero field is no bound.
type Bounds struct {
	// Header bounds the wait for the response headers.
	Header time.Duration
	// Idle bounds each wait for more of the response body: the gap
	// between a stream's chunks. Time the caller spends not reading (a
	// slow client downstream) does not count.
	Idle time.Duration
	// Total bounds the whole call, from sending it to the end of its body.
	Total time.Duration
}

// DefaultAbortGrace is how long an abandoned HTTP/1 call waits for the
// upstream to hang up before its connection is closed outright.
const DefaultAbortGrace = 2 * time.Second

// callOpts say how send runs one call.
type callOpts struct {
	// client sends it; nil: http.DefaultClient.
	client *http.Client
	clock  clock.Clock
	bounds Bounds
	// grace: see DefaultAbortGrace; 0 is the default, negative none.
	grace time.Duration
}

func (o callOpts) abortGrace() time.Duration {
	switch {
	case o.grace == 0:
		return DefaultAbortGrace
	case o.grace < 0:
		return 0
	}
	return o.grace
}

// post sends body to path under base with the headers h (and apiKey, if
// given, as a bearer token) and returns the answer, whatever its status,
// as send does.
func (o callOpts) post(ctx context.Context, base, path, apiKey string, body []byte, h http.Header) (*http.Response, error) {
	return o.call(ctx, http.MethodPost, base, path, apiKey, body, h)
}

// call is post with another method (a body is then optional).
func (o callOpts) call(ctx context.Context, method, base, path, apiKey string, body []byte, h http.Header) (*http.Response, error) {
	x, rctx := newExchange(ctx, o)
	req, err := newRequest(rctx, method, base, path, apiKey, body, h)
	if err != nil {
		x.cancel(context.Canceled)
		return nil, err
	}
	return x.run(ctx, httpClient(o.client), req)
}

// do sends c to path under base: its body, or its upload.
func (o callOpts) do(ctx context.Context, base, path string, c Call, h http.Header) (*http.Response, error) {
	if c.Upload != nil {
		return o.upload(ctx, c.method(), base, path, "", c.Upload, h)
	}
	return o.call(ctx, c.method(), base, path, "", c.Body, h)
}

// upload is call with u as the body: read as it is sent, its length
// declared if known (else the body goes chunked).
func (o callOpts) upload(ctx context.Context, method, base, path, apiKey string, u *Upload, h http.Header) (*http.Response, error) {
	x, rctx := newExchange(ctx, o)
	req, err := newRequest(rctx, method, base, path, apiKey, nil, h)
	if err != nil {
		x.cancel(context.Canceled)
		return nil, err
	}
	// The transport closes the request's body; the caller's Close of
	// u.Body stays its own.
	req.Body, req.ContentLength = io.NopCloser(u.Body), u.Length
	if u.Length == 0 {
		req.Body = http.NoBody
	}
	req.Header.Set("Content-Type", u.ContentType)
	return x.run(ctx, httpClient(o.client), req)
}

// errBodyClosed is why a call whose body was closed before its end was
// aborted.
var errBodyClosed = errors.New("response body closed before its end")

// send makes one upstream call under o's bounds. It returns the response,
// whatever its status, or an *Error (a timeout has Timeout set), or ctx's
// error when ctx ended first.
//
// An abandoned call — ctx ended, a bound passed, or the body closed before
// its end — is torn down before send returns or Close returns: the call
// is not over while the upstream may still be working on it, and callers
// release capacity when it is over. On an HTTP/1 connection Weir shuts
// its side (the upstream sees the client hang up, as it would if the
// connection were closed), then waits, for up to the abort grace, for the
// upstream to close the connection in turn, which servers do once they
// have stopped work on the request; then the connection is closed. An
// HTTP/2 connection carries other calls: its stream is reset at once.
//
// The bounds and the watch on ctx cost one timer and no goroutine while
// the call runs.
func send(ctx context.Context, hc *http.Client, req *http.Request, o callOpts) (*http.Response, error) {
	x, rctx := newExchange(ctx, o)
	return x.run(ctx, hc, req.WithContext(rctx))
}

// newExchange is the state of a call on ctx under o, and the context to
// send its request with: the transport sees only that one, so that
// cancelling ctx goes through abort, and the connection is shut down in
// order rather than closed under the upstream's feet.
func newExchange(ctx context.Context, o callOpts) (*exchange, context.Context) {
	x := &exchange{clock: o.clock, b: o.bounds, grace: o.abortGrace()}
	if x.clock == nil {
		x.clock = clock.Real
	}
	rctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	x.cancel = cancel
	x.trace = httptrace.ClientTrace{GotConn: x.gotConn, WroteRequest: x.wroteRequest, PutIdleConn: x.putIdleConn}
	return x, httptrace.WithClientTrace(rctx, &x.trace)
}

// run sends req, whose context is newExchange's, as send does.
func (x *exchange) run(ctx context.Context, hc *http.Client, req *http.Request) (*http.Response, error) {
	x.mu.Lock()
	x.start = x.clock.Now()
	x.armLocked(x.start)
	x.mu.Unlock()
	x.stopWatch = context.AfterFunc(ctx, func() { x.abort(ctx.Err()) })

	// The upstream joins the call's trace, if it is traced (its span is
	// ctx's, not the exchange's context's).
	tracing.Inject(ctx, req.Header)
	resp, err := do(hc, req)
	if err != nil {
		if cause := x.end(); cause != nil {
			return nil, cause
		}
		return nil, classify(ctx, err)
	}
	x.body = body{x: x, rc: resp.Body}
	b := &x.body
	if err := x.gotHeaders(); err != nil {
		b.Close()
		return nil, err
	}
	resp.Body = b
	return resp, nil
}

// exchange is the state of one call that send watches.
type exchange struct {
	clock     clock.Clock
	b         Bounds
	grace     time.Duration
	cancel    context.CancelCauseFunc
	stopWatch func() bool
	// trace and body live with the exchange: one allocation for the
	// three.
	trace httptrace.ClientTrace
	body  body

	mu         sync.Mutex
	start      time.Time
	timer      clock.Timer
	due        time.Time // when timer fires
	gen        uint64    // numbers timers; a timer of an older one does nothing
	conn       net.Conn
	wrote      bool      // the request went out whole on conn
	headers    bool      // the response headers arrived
	readSince  time.Time // when the pending body read began; zero: none
	err        error     // why the call was aborted; nil while it runs
	halfClosed bool
	// done: the call is over — its body ended whole, or its connection
	// went back to the transport's pool, or end ran. From then on the
	// connection may carry another call, so nothing shuts it.
	done bool
}

func (x *exchange) gotConn(info httptrace.GotConnInfo) {
	x.mu.Lock()
	x.conn, x.wrote = info.Conn, false
	x.mu.Unlock()
}

func (x *exchange) wroteRequest(info httptrace.WroteRequestInfo) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.wrote = info.Err == nil
	// An abort that came while the request was going out shuts the
	// connection now that it is out whole.
	if x.wrote && x.halfClosed {
		x.shutLocked()
	}
}

// putIdleConn learns that the transport took the connection back for
// other calls: the body was read to its end. A connection Weir has shut
// its side of is no use to them; closing it outright makes the transport
// drop it before another call picks it up.
func (x *exchange) putIdleConn(err error) {
	if err != nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.halfClosed && x.wrote && x.conn != nil {
		_ = x.conn.Close()
	}
	x.finishLocked()
}

// finishLocked marks the call over without an abort.
func (x *exchange) finishLocked() {
	x.done = true
	x.stopTimerLocked()
}

// gotHeaders marks the headers arrived: from now on the idle bound
// applies. It returns the cause if the call was aborted meanwhile.
func (x *exchange) gotHeaders() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.err != nil {
		return x.err
	}
	x.headers = true
	now := x.clock.Now()
	if next := x.nextLocked(now); x.timer != nil && !next.IsZero() && !x.due.After(next) {
		// The timer pending fires no later than a bound may now pass:
		// check then sets it again.
		return nil
	}
	x.stopTimerLocked()
	x.armLocked(now)
	return nil
}

// nextLocked is the next moment a bound may pass; zero: none.
func (x *exchange) nextLocked(now time.Time) time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	if x.b.Total > 0 {
		consider(x.start.Add(x.b.Total))
	}
	switch {
	case !x.headers && x.b.Header > 0:
		consider(x.start.Add(x.b.Header))
	case x.headers && x.b.Idle > 0:
		from := x.readSince
		if from.IsZero() {
			from = now // not reading: look again an idle bound from now
		}
		consider(from.Add(x.b.Idle))
	}
	return next
}

// armLocked sets the timer for the next moment a bound may pass.
func (x *exchange) armLocked(now time.Time) {
	next := x.nextLocked(now)
	x.timer = nil
	if next.IsZero() {
		return
	}
	x.gen++
	gen := x.gen
	x.due = next
	x.timer = x.clock.AfterFunc(next.Sub(now), func() { x.check(gen) })
}

func (x *exchange) stopTimerLocked() {
	if x.timer != nil {
		x.timer.Stop()
		x.timer = nil
	}
	x.gen++
}

// check runs when a bound may have passed: it aborts the call if one has,
// or sets the timer again.
func (x *exchange) check(gen uint64) {
	now := x.clock.Now()
	x.mu.Lock()
	if gen != x.gen || x.err != nil || x.done {
		x.mu.Unlock()
		return
	}
	cause := x.overdueLocked(now)
	if cause == nil {
		x.armLocked(now)
	}
	x.mu.Unlock()
	if cause != nil {
		x.abort(cause)
	}
}

func (x *exchange) overdueLocked(now time.Time) error {
	switch {
	case x.b.Total > 0 && now.Sub(x.start) >= x.b.Total:
		return &Error{Timeout: true, Err: fmt.Errorf("the call took longer than %s", x.b.Total)}
	case !x.headers && x.b.Header > 0 && now.Sub(x.start) >= x.b.Header:
		return &Error{Timeout: true, Err: fmt.Errorf("no response headers within %s", x.b.Header)}
	case x.headers && x.b.Idle > 0 && !x.readSince.IsZero() && now.Sub(x.readSince) >= x.b.Idle:
		return &Error{Timeout: true, Err: fmt.Errorf("nothing received for %s", x.b.Idle)}
	}
	return nil
}

// abort ends the call for cause (the first cause wins): it shuts Weir's
// side of an HTTP/1 connection and gives the upstream the grace to hang
// up, or cancels the request at once.
func (x *exchange) abort(cause error) {
	x.mu.Lock()
	if x.err != nil || x.done {
		x.mu.Unlock()
		return
	}
	x.err = cause
	x.stopTimerLocked()
	// Without a connection yet, the request is cancelled at once: it
	// most likely never goes out. (The transport may still send it if
	// the cancellation races with its getting a connection; then it
	// closes the connection without waiting for the upstream.)
	half := x.halfClosableLocked()
	if half {
		// If the request is still going out, wroteRequest shuts the
		// connection once it is out: shutting it earlier would make the
		// transport send the request again on another.
		x.halfClosed = true
		x.timer = x.clock.AfterFunc(x.grace, func() { x.cancel(cause) })
		if x.wrote {
			x.shutLocked()
		}
	}
	x.mu.Unlock()
	if !half {
		x.cancel(cause)
	}
}

type closeWriter interface{ CloseWrite() error }

// halfClosableLocked reports whether the call's connection may be shut on
// Weir's side alone: there is one, and no other call shares it (HTTP/1).
func (x *exchange) halfClosableLocked() bool {
	if x.grace <= 0 || x.conn == nil {
		return false
	}
	if tc, ok := x.conn.(*tls.Conn); ok && tc.ConnectionState().NegotiatedProtocol == "h2" {
		return false
	}
	_, ok := x.conn.(closeWriter)
	return ok
}

// shutLocked shuts Weir's side of the call's connection, or cancels the
// call if it cannot. It runs under x.mu, so that the connection cannot go
// back to the pool (putIdleConn) between the check and the shutdown.
func (x *exchange) shutLocked() {
	if x.done {
		return
	}
	if x.conn.(closeWriter).CloseWrite() != nil {
		x.cancel(x.err)
	}
}

// end stops watching the call and frees its context; it returns the cause
// if the call was aborted.
func (x *exchange) end() error {
	x.mu.Lock()
	x.finishLocked()
	err := x.err
	x.mu.Unlock()
	x.stopWatch()
	x.cancel(context.Canceled)
	return err
}

// body is a response body under its call's bounds.
type body struct {
	x      *exchange
	rc     io.ReadCloser
	eof    bool
	closed bool
}

func (b *body) Read(p []byte) (int, error) {
	x := b.x
	x.mu.Lock()
	if x.err != nil {
		err := x.err
		x.mu.Unlock()
		return 0, err
	}
	x.readSince = x.clock.Now()
	x.mu.Unlock()

	n, err := b.rc.Read(p)

	x.mu.Lock()
	x.readSince = time.Time{}
	switch {
	case err == nil:
	case x.err != nil:
		// Aborted: even a clean end is the upstream stopping for the
		// abort, not the whole answer.
		err = x.err
	case err == io.EOF:
		x.finishLocked()
	default:
		err = &Error{Err: err}
	}
	x.mu.Unlock()
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// Close ends the call. Before the body's end it aborts the call and
// returns once the upstream hung up or the grace passed (see send).
func (b *body) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	x := b.x
	if !b.eof {
		x.abort(errBodyClosed)
		x.mu.Lock()
		drain := x.halfClosed
		x.mu.Unlock()
		if drain {
			// Until the upstream closes its side, or the grace cancels
			// the request.
			_, _ = io.Copy(io.Discard, b.rc)
		}
	}
	err := b.rc.Close()
	x.end()
	return err
}
