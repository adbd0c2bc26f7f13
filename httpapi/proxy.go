package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/provider"
)

// Request headers a client may use to ask for less than its due.
const (
	// HeaderPriority lowers (never raises) the priority of a request.
	HeaderPriority = "X-Weir-Priority"
	// HeaderMaxWait shortens (never lengthens) how long it may queue: a Go
	// duration ("2s") or seconds ("2", "0.5").
	HeaderMaxWait = "X-Weir-Max-Wait"
	// HeaderQueueWait, on answers, says how long the request queued, in
	// milliseconds.
	HeaderQueueWait = "X-Weir-Queue-Wait-Ms"
)

// Request headers of task submissions (POST /v1/videos, POST /v1/tasks).
const (
	// HeaderCallbackURL asks for signed callback events about the task
	// at this URL, as POST /v1/tasks's callback_url does; it is how a
	// video request, whose body is OpenAI's, asks for them. The same
	// checks apply: callbacks must be enabled (tasks.webhook_secret) and
	// the URL must not name an internal address. On POST /v1/tasks a
	// body's callback_url and this header must agree if both are given.
	HeaderCallbackURL = "X-Weir-Callback-URL"
	// HeaderCallbackEvents lists, comma-separated, the events the
	// callback URL gets beyond the terminal one, as callback_events does:
	// "progress" (task.running and throttled task.progress). It needs a
	// callback URL; on POST /v1/tasks it must agree with callback_events
	// if both are given.
	HeaderCallbackEvents = "X-Weir-Callback-Events"
)

// call is one model request on its way through the gateway. It is held
// for as long as the request waits, so it keeps what admission and the
// answer need, not the whole key.
type call struct {
	ep       endpoint
	keyID    string
	group    string // the key's group, or the default: what the scopes use
	req      *request
	model    weir.Model
	st       *gateway.Snapshot
	prio     int32
	deadline time.Time
	// maxWait is what set the deadline: the gateway's default, or less if
	// X-Weir-Max-Wait asked (maxWaitAsked).
	maxWait      time.Duration
	maxWaitAsked bool
	start        time.Time
	waited       time.Duration
	usage        weir.Usage
}

// model serves one OpenAI-compatible endpoint.
func (s *Server) model(ep endpoint) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.deps.Clock.Now()
		ri := info(r.Context())
		c, aerr := s.prepare(w, r, ep)
		if aerr != nil {
			writeError(w, aerr)
			s.deps.Metrics.ObserveHTTP(ep.name, aerr.Code.Status(), s.deps.Clock.Now().Sub(start))
			return
		}
		c.start = start
		status := s.serve(w, r, c)
		c.usage.Latency = s.deps.Clock.Now().Sub(start)
		c.usage.Waited = c.waited
		c.usage.Status = status
		c.usage.At = start
		s.deps.Usage(c.usage)
		s.deps.Metrics.ObserveHTTP(ep.name, status, c.usage.Latency)
		if s.deps.Logger.Enabled(r.Context(), slog.LevelInfo) {
			ri.log().Info("model request", "endpoint", ep.name, "model", c.model.Name, "platform_model", c.usage.PlatformModel,
				"status", status, "outcome", c.usage.Outcome, "waited_ms", c.waited.Milliseconds(), "key", c.keyID)
		}
	})
}

// prepare authenticates, reads and validates the request and resolves its
// model, group, priority and deadline. Nothing in the engine changes until
// it has passed.
func (s *Server) prepare(w http.ResponseWriter, r *http.Request, ep endpoint) (*call, *apiError) {
	key, aerr := s.authenticate(r)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := s.limitBody(w, r); aerr != nil {
		return nil, aerr
	}
	body, err := readBody(r.Body, r.ContentLength)
	if err != nil {
		return nil, s.bodyError(err, "could not read request body")
	}
	req, aerr := decodeRequest(ep, body)
	if aerr != nil {
		return nil, aerr
	}
	st := s.deps.Gateway.Snapshot()
	if st == nil {
		return nil, errorf(CodeNoCandidate, "", "the gateway has no catalog yet")
	}
	model, ok := st.Model(req.model)
	if !ok {
		return nil, errorf(CodeNotFound, "model", fmt.Sprintf("the model %q does not exist", req.model))
	}
	if !key.Allows(req.model) {
		return nil, errorf(CodeForbidden, "model", fmt.Sprintf("this key may not use the model %q", req.model))
	}
	if model.Kind != ep.kind {
		return nil, errorf(CodeInvalidRequest, "model", fmt.Sprintf("the model %q serves %s, not %s", req.model, model.Kind, ep.kind))
	}
	groupName, group := st.GroupOf(key)
	prio, aerr := requestPriority(r, group.Priority)
	if aerr != nil {
		return nil, aerr
	}
	// The group of the request (which may be the default) is what the
	// scopes use.
	c := &call{ep: ep, keyID: key.ID, group: groupName, req: req, model: model, st: st, prio: prio}
	maxWait := s.cfg.DefaultMaxWait
	d, ok, aerr := requestMaxWait(r)
	if aerr != nil {
		return nil, aerr
	}
	if ok && (maxWait < 0 || d < maxWait) {
		maxWait, c.maxWaitAsked = d, true
	}
	if maxWait >= 0 {
		c.maxWait = maxWait
		c.deadline = s.deps.Clock.Now().Add(maxWait)
	}
	c.usage = weir.Usage{RequestID: info(r.Context()).id, KeyID: key.ID, Model: model.Name, Endpoint: ep.name}
	if err := s.deps.Gateway.EnsureKeyScope(r.Context(), key); err != nil {
		return nil, errorf(CodeInternal, "", "could not configure the key's scope")
	}
	return c, nil
}

// limitBody refuses a body declared larger than MaxBodyBytes and bounds
// the reading of r.Body to it: a longer one fails with an error bodyError
// maps to payload_too_large.
func (s *Server) limitBody(w http.ResponseWriter, r *http.Request) *apiError {
	if r.ContentLength > s.cfg.MaxBodyBytes {
		return s.tooLarge()
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	return nil
}

func (s *Server) tooLarge() *apiError {
	return errorf(CodePayloadTooLarge, "", fmt.Sprintf("request body is larger than %d bytes", s.cfg.MaxBodyBytes))
}

// bodyError is the answer to err from reading a body limitBody bounded:
// payload_too_large past the limit, request_timeout past the body's
// deadline, else invalid_request with msg.
func (s *Server) bodyError(err error, msg string) *apiError {
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return s.tooLarge()
	}
	if bodyTimedOut(err) {
		return errorf(CodeRequestTimeout, "", fmt.Sprintf("the request body did not arrive within %s", s.cfg.BodyTimeout))
	}
	return errorf(CodeInvalidRequest, "", msg)
}

// requestPriority is base, lowered (never raised) by X-Weir-Priority.
func requestPriority(r *http.Request, base int32) (int32, *apiError) {
	v, aerr := oneHeader(r, HeaderPriority)
	if v == "" || aerr != nil {
		return base, aerr
	}
	p, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, errorf(CodeInvalidRequest, HeaderPriority, fmt.Sprintf("priority must be an integer from %d to %d", math.MinInt32, math.MaxInt32))
	}
	return min(base, int32(p)), nil
}

// requestMaxWait is the wait X-Weir-Max-Wait asks for, if it asks.
func requestMaxWait(r *http.Request) (time.Duration, bool, *apiError) {
	v, aerr := oneHeader(r, HeaderMaxWait)
	if v == "" || aerr != nil {
		return 0, false, aerr
	}
	d, err := parseWait(v)
	if err != nil {
		return 0, false, errorf(CodeInvalidRequest, HeaderMaxWait, fmt.Sprintf("max wait must be a duration such as 2s or a number of seconds, from 0 to %g", maxWaitSeconds))
	}
	return d, true, nil
}

// maxWaitSeconds is the most X-Weir-Max-Wait may say as a number.
const maxWaitSeconds = 1e6

// parseWait reads a wait: a Go duration or a number of seconds, neither
// negative, the number finite and at most maxWaitSeconds (NaN, which
// every comparison lets through, is refused by name).
func parseWait(v string) (time.Duration, error) {
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return d, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > maxWaitSeconds {
		return 0, fmt.Errorf("bad wait %q", v)
	}
	return time.Duration(f * float64(time.Second)), nil
}

// serve admits c, calls upstream candidates in order within the retry
// budget (holding one lease at a time), and answers. It returns the HTTP
// status written.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, c *call) int {
	ctx := r.Context()
	order := s.deps.Router.Order(c.model)
	var last *provider.Error
	for attempt := 0; attempt < s.cfg.RetryBudget && len(order) > 0; attempt++ {
		lease, err := s.admit(ctx, c, order, attempt)
		if err != nil {
			aerr := asAPIError(err)
			if aerr == nil {
				c.usage.Outcome = "cancelled"
				return 499 // the client is gone; nobody reads the answer
			}
			c.usage.Outcome = string(aerr.Code)
			writeError(w, aerr)
			return aerr.Code.Status()
		}
		pmName := order[lease.Candidate]
		pm, _ := c.st.PlatformModel(pmName)
		c.usage.PlatformModel = pmName
		status, retry := s.attempt(w, r, c, lease, pm)
		if retry == nil {
			return status
		}
		last = retry
		order = slices.DeleteFunc(order, func(n string) bool { return n == pmName })
	}
	if last == nil {
		c.usage.Outcome = string(CodeNoCandidate)
		writeError(w, errorf(CodeNoCandidate, "model", fmt.Sprintf("no platform can serve %q right now", c.model.Name)))
		return CodeNoCandidate.Status()
	}
	code := CodeUpstreamError
	if last.Timeout {
		code = CodeUpstreamTimeout
	}
	c.usage.Outcome = string(code)
	writeError(w, &apiError{Code: code, Message: "every upstream attempt failed; last: " + last.Error(), RetryAfter: last.RetryAfter})
	return code.Status()
}

// admit waits for a lease on the first of order's platform models that has
// room. A request whose rate window opens only after its deadline is
// answered 429 at once rather than left to time out.
func (s *Server) admit(ctx context.Context, c *call, order []string, attempt int) (admission.Lease, error) {
	cands := make([]admission.Candidate, len(order))
	for i, pm := range order {
		cands[i] = admission.Candidate{
			Needs: []admission.Need{
				{Scope: weir.KeyScope(c.keyID), Amount: 1},
				{Scope: weir.GroupScope(c.group), Amount: 1},
				{Scope: weir.PlatformModelScope(pm), Amount: 1},
			},
			Tokens: c.req.estimate,
		}
	}
	areq := admission.Request{
		ID:          info(ctx).id + "/" + strconv.Itoa(attempt),
		Priority:    c.prio,
		FairnessKey: c.keyID,
		Deadline:    c.deadline,
		Candidates:  cands,
	}
	start := s.deps.Clock.Now()
	lease, err := s.deps.Engine.TryAcquire(ctx, areq)
	var rl *admission.RateLimitedError
	switch {
	case err == nil:
	case errors.As(err, &rl) && !c.deadline.IsZero() && start.Add(rl.RetryAfter).After(c.deadline):
		return lease, &apiError{Code: CodeRateLimited, Message: "rate limit reached for " + c.model.Name, RetryAfter: rl.RetryAfter}
	case errors.Is(err, admission.ErrWouldWait), errors.Is(err, admission.ErrRateLimited):
		lease, err = s.deps.Engine.Acquire(ctx, areq)
	}
	waited := s.deps.Clock.Now().Sub(start)
	c.waited += waited
	if err == nil {
		s.deps.Metrics.ObserveQueueWait(c.model.Name, waited)
		return lease, nil
	}
	return lease, s.admissionError(ctx, c, err)
}

func (s *Server) admissionError(ctx context.Context, c *call, err error) error {
	var tl *admission.TokenLimitError
	switch {
	case ctx.Err() != nil:
		return errClientGone
	case errors.Is(err, admission.ErrTimeout):
		own := fmt.Sprintf("the gateway's default max wait (default_max_wait %s)", c.maxWait)
		if c.maxWaitAsked {
			own = fmt.Sprintf("the request's own max wait (%s %s)", HeaderMaxWait, c.maxWait)
		}
		return queueTimeout(c.model.Name, c.waited, own, err)
	case errors.Is(err, admission.ErrQueueFull):
		return queueFull(c.model.Name, err)
	case errors.As(err, &tl):
		param := ""
		if c.req.maxTokens > 0 {
			param = "max_tokens"
		}
		return tooManyTokens(c.model.Name, param, tl)
	case errors.Is(err, admission.ErrNoCandidate), errors.Is(err, admission.ErrUnknownScope):
		return errorf(CodeNoCandidate, "model", "no platform can serve "+c.model.Name+" right now")
	case errors.Is(err, admission.ErrClosed):
		return errorf(CodeNoCandidate, "", "the gateway is shutting down")
	}
	info(ctx).log().Error("admission failed", "error", err)
	return errorf(CodeInternal, "", "admission failed")
}

// asAPIError unwraps admit's error; nil means the client went away.
func asAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	return nil
}

// attempt calls one upstream under lease. It returns the status written,
// or a retryable *provider.Error (and writes nothing) when another
// candidate should be tried. The lease is renewed while the call runs (if
// it can expire) and released once the upstream call is over — its body
// closed and its connection torn down — and before anything is written
// to the client that no longer needs the upstream; whatever happens, it
// is released before attempt returns.
func (s *Server) attempt(w http.ResponseWriter, r *http.Request, c *call, lease admission.Lease, pm weir.PlatformModel) (int, *provider.Error) {
	ctx := r.Context()
	hold := s.hold(ctx, lease)
	defer hold.release()
	body, err := c.req.withModel(pm.Upstream)
	if err != nil {
		c.usage.Outcome = string(CodeInternal)
		writeError(w, errorf(CodeInternal, "", "could not encode the upstream request"))
		return CodeInternal.Status(), nil
	}
	ad := c.st.Adapter(pm.Platform)
	t0 := s.deps.Clock.Now()
	resp, err := ad.Do(ctx, provider.Call{Path: c.ep.path, Body: body, Stream: c.req.stream, Header: r.Header})
	if err != nil {
		if ctx.Err() != nil {
			c.usage.Outcome = "cancelled"
			return 499, nil
		}
		var pe *provider.Error
		if !errors.As(err, &pe) {
			pe = &provider.Error{Err: err}
		}
		s.deps.Metrics.ObserveUpstream(pm.Name, upstreamOutcome(pe), s.deps.Clock.Now().Sub(t0))
		if pe.Retryable() {
			s.upstreamFailed(ctx, pm, pe, "trying the next candidate")
			return 0, pe
		}
		// The client's request was refused upstream: pass the answer on.
		c.usage.Outcome = "upstream_" + strconv.Itoa(pe.Status)
		passUpstreamError(w, pe)
		return pe.Status, nil
	}
	headersIn := s.deps.Clock.Now().Sub(t0)

	// done ends the upstream call and gives the lease back, having
	// settled its tokens against what the answer reported (or the
	// estimate): at the end of the upstream's answer, not the client's.
	finished := false
	done := func(u usage, got bool) {
		if finished {
			return
		}
		finished = true
		_ = resp.Body.Close()
		if !got {
			u = usage{PromptTokens: c.req.estimate}
		}
		c.usage.PromptTokens, c.usage.CompletionTokens = u.PromptTokens, u.CompletionTokens
		if total := u.total(); total > 0 {
			_ = s.deps.Engine.Reconcile(context.WithoutCancel(ctx), lease.ID, lease.Owner, total)
		}
		hold.release()
	}
	defer done(usage{}, false)
	out := &clientWriter{w: w, rc: http.NewResponseController(w), timeout: s.cfg.StreamWriteTimeout}
	defer out.clearDeadline()
	start := func() {
		h := w.Header()
		for _, name := range []string{"Content-Type", "Content-Disposition", "Cache-Control"} {
			if v := resp.Header.Get(name); v != "" {
				h.Set(name, v)
			}
		}
		h.Set(HeaderQueueWait, strconv.FormatInt(c.waited.Milliseconds(), 10))
	}
	var d delivery
	if c.req.stream {
		d = s.stream(out, resp, start, done)
	} else {
		d = s.copyBody(ctx, out, resp, start, done)
	}

	pe := d.upstream
	if d.status == 0 && ctx.Err() != nil {
		c.usage.Outcome = "cancelled"
		return 499, nil // the client is gone; nobody reads the answer
	}
	switch {
	case pe != nil && d.status == 0 && pe.Retryable():
		// Nothing reached the client: another candidate may serve.
		s.deps.Metrics.ObserveUpstream(pm.Name, upstreamOutcome(pe), headersIn)
		s.upstreamFailed(ctx, pm, pe, "trying the next candidate")
		return 0, pe
	case pe != nil:
		s.deps.Metrics.ObserveUpstream(pm.Name, upstreamOutcome(pe), headersIn)
		s.upstreamFailed(ctx, pm, pe, "the answer was cut short")
		c.usage.Outcome = "upstream_broken"
		if pe.Timeout {
			c.usage.Outcome = string(CodeUpstreamTimeout)
		}
		if d.status == 0 {
			code := CodeUpstreamError
			if pe.Timeout {
				code = CodeUpstreamTimeout
			}
			writeError(w, errorf(code, "", "the upstream failed: "+pe.Error()))
			return code.Status(), nil
		}
		return d.status, nil
	case d.outcome != "":
		s.deps.Metrics.ObserveUpstream(pm.Name, d.outcome, headersIn)
		c.usage.Outcome = d.outcome
		return d.status, nil
	}
	s.deps.Router.Success(pm.Name)
	s.deps.Metrics.ObserveUpstream(pm.Name, "ok", headersIn)
	switch {
	case d.complete:
		c.usage.Outcome = "ok"
	case errors.Is(d.client, os.ErrDeadlineExceeded):
		// (The server cancels the request's context once a write fails,
		// so the context cannot tell this from a client that left.)
		c.usage.Outcome = "client_write_timeout"
	default:
		c.usage.Outcome = "cancelled"
	}
	if d.status == 0 {
		return 499, nil
	}
	return d.status, nil
}

// upstreamFailed counts a retryable upstream failure against pm's health
// and logs it; next says what happens now. A refused credential is
// logged with the platform's name and without the upstream's words.
func (s *Server) upstreamFailed(ctx context.Context, pm weir.PlatformModel, pe *provider.Error, next string) {
	s.deps.Router.Failure(pm.Name)
	if pe.Credential {
		info(ctx).log().Warn("the platform refused its credential; "+next, "platform", pm.Platform, "platform_model", pm.Name, "status", pe.Status)
		return
	}
	info(ctx).log().Warn("upstream failed; "+next, "platform", pm.Platform, "platform_model", pm.Name, "error", pe.Error())
}

// delivery is how passing an upstream answer to the client went.
type delivery struct {
	// status is what was written to the client; 0: nothing yet.
	status int
	// complete: the whole answer reached the client.
	complete bool
	// upstream is the upstream's failure (a bound passed, the connection
	// broke) if it failed.
	upstream *provider.Error
	// client is the error writing to the client, or reading when the
	// client went away.
	client error
	// outcome is set when the delivery answered an error of its own.
	outcome string
}

// readFailed files err, from reading the upstream's body, in d.
func (d *delivery) readFailed(err error) {
	var pe *provider.Error
	if errors.As(err, &pe) {
		d.upstream = pe
		return
	}
	d.client = err // the client went away: the call was aborted for it
}

func upstreamOutcome(pe *provider.Error) string {
	switch {
	case pe.Credential:
		return "credential"
	case pe.Timeout:
		return "timeout"
	case pe.Status == 0:
		return "connect_error"
	default:
		return strconv.Itoa(pe.Status)
	}
}

// passUpstreamError forwards an upstream's non-retryable answer: its body
// when it is OpenAI-shaped JSON, else wrapped in ours. A refusal of the
// platform's credential is never passed on (the adapter marks it
// retryable, so it does not come here; this holds the line if it did).
func passUpstreamError(w http.ResponseWriter, pe *provider.Error) {
	if pe.Credential || pe.Status == http.StatusUnauthorized || pe.Status == http.StatusForbidden {
		writeError(w, errorf(CodeUpstreamError, "", "the upstream refused the gateway's credential for it"))
		return
	}
	var probe struct {
		Error *json.RawMessage `json:"error"`
	}
	if json.Unmarshal(pe.Body, &probe) == nil && probe.Error != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(pe.Status)
		_, _ = w.Write(pe.Body)
		return
	}
	code := CodeInvalidRequest
	switch pe.Status {
	case http.StatusNotFound:
		code = CodeNotFound
	case http.StatusRequestEntityTooLarge:
		code = CodePayloadTooLarge
	}
	writeError(w, errorf(code, "", fmt.Sprintf("upstream answered %d: %s", pe.Status, bytes.TrimSpace(pe.Body))))
}

// copyBody passes a whole answer on. JSON is read whole (up to
// MaxResponseBytes), the upstream call ended, and then written; anything
// else (audio, say) is passed through as it arrives. start sets the
// answer's headers; done ends the upstream call.
func (s *Server) copyBody(ctx context.Context, out *clientWriter, resp *http.Response, start func(), done func(usage, bool)) delivery {
	var d delivery
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return s.pump(out, resp, start, done, nil)
	}
	limit := s.cfg.MaxResponseBytes
	var body []byte
	var err error
	if resp.ContentLength <= limit {
		body, err = io.ReadAll(io.LimitReader(resp.Body, limit+1))
	}
	if err != nil {
		done(usage{}, false)
		d.readFailed(err)
		return d
	}
	if resp.ContentLength > limit || int64(len(body)) > limit {
		done(usage{}, false)
		info(ctx).log().Warn("upstream answer over server.max_response_bytes; refused", "limit", limit)
		d.outcome = "upstream_too_large"
		d.status = CodeUpstreamError.Status()
		writeError(out.w, errorf(CodeUpstreamError, "", fmt.Sprintf("the upstream's answer is larger than the gateway's limit of %d bytes", limit)))
		return d
	}
	u, ok := usageOf(body)
	done(u, ok)
	start()
	out.w.WriteHeader(resp.StatusCode)
	d.status = resp.StatusCode
	if _, err := out.Write(body); err != nil {
		d.client = err
		return d
	}
	d.complete = true
	return d
}

// pump passes resp's body to the client as it arrives, flushing each
// read: the headers go with the first bytes, so an upstream that fails
// before sending any leaves the client untouched. scan, if set, sees each
// read. It ends the upstream call (done, without usage) before it
// returns.
func (s *Server) pump(out *clientWriter, resp *http.Response, start func(), done func(usage, bool), scan func([]byte)) delivery {
	var d delivery
	begin := func() {
		if d.status == 0 {
			start()
			if scan == nil && resp.ContentLength >= 0 {
				out.w.Header().Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
			}
			out.w.WriteHeader(resp.StatusCode)
			d.status = resp.StatusCode
		}
	}
	buf := make([]byte, 16<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			begin()
			if scan != nil {
				scan(buf[:n])
			}
			if _, werr := out.Write(buf[:n]); werr != nil {
				d.client = werr
				break
			}
			if ferr := out.Flush(); ferr != nil {
				d.client = ferr
				break
			}
		}
		if err == io.EOF {
			begin()
			d.complete = true
			break
		}
		if err != nil {
			d.readFailed(err)
			break
		}
	}
	done(usage{}, false)
	return d
}

// stream passes an SSE answer through as it arrives, flushing each read,
// and watches the data lines for a usage report. It stops at once when
// the client goes away or stops reading (the write timeout), and when
// the upstream fails mid-stream it ends the stream with an error event,
// as OpenAI's streams report errors.
func (s *Server) stream(out *clientWriter, resp *http.Response, start func(), done func(usage, bool)) delivery {
	var (
		line    []byte
		u       usage
		got     bool
		chunks  int64
		sawDone bool
	)
	scan := func(b []byte) {
		for len(b) > 0 {
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				if len(line) < 1<<20 {
					line = append(line, b...)
				}
				return
			}
			line = append(line, b[:i]...)
			b = b[i+1:]
			if data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:")); ok {
				data = bytes.TrimSpace(data)
				switch {
				case bytes.Equal(data, []byte("[DONE]")):
					sawDone = true
				default:
					chunks++
					if uu, ok := usageOf(data); ok {
						u, got = uu, true
					}
				}
			}
			line = line[:0]
		}
	}
	// Usage is settled when the upstream's part ends, before the lease
	// goes back.
	settle := func(usage, bool) {
		if !got && chunks > 0 {
			// No usage chunk: count about one token per content chunk.
			u = usage{CompletionTokens: chunks}
		}
		done(u, got || chunks > 0)
	}
	d := s.pump(out, resp, start, settle, scan)
	if d.complete && !sawDone && !got {
		// The upstream ended the stream without finishing it.
		d.complete, d.outcome = false, "upstream_broken"
	}
	if d.upstream != nil && d.status != 0 {
		code := CodeUpstreamError
		if d.upstream.Timeout {
			code = CodeUpstreamTimeout
		}
		out.streamError(code, "the upstream failed mid-stream: "+d.upstream.Error())
	}
	return d
}

// listModels answers GET /v1/models with the models the key may use.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	key, aerr := s.authenticate(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	st := s.deps.Gateway.Snapshot()
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	if st != nil {
		for _, name := range st.ModelNames() {
			if key.Allows(name) {
				out.Data = append(out.Data, model{ID: name, Object: "model", OwnedBy: "weir"})
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (s *Server) getModel(w http.ResponseWriter, r *http.Request) {
	key, aerr := s.authenticate(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	name := r.PathValue("model")
	st := s.deps.Gateway.Snapshot()
	if st == nil || !key.Allows(name) {
		writeError(w, errorf(CodeNotFound, "model", fmt.Sprintf("the model %q does not exist", name)))
		return
	}
	if _, ok := st.Model(name); !ok {
		writeError(w, errorf(CodeNotFound, "model", fmt.Sprintf("the model %q does not exist", name)))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": name, "object": "model", "created": 0, "owned_by": "weir"})
}

// QueueView is what /admin/queues answers: every scope's state.
type QueueView struct {
	Scopes []ScopeView `json:"scopes"`
}

// ScopeView is one scope in QueueView.
type ScopeView struct {
	Name     string  `json:"name"`
	Limit    int64   `json:"limit"`
	InFlight int64   `json:"in_flight"`
	Leases   int     `json:"leases"`
	Waiting  int     `json:"waiting"`
	Held     int64   `json:"held,omitempty"`
	Orphaned bool    `json:"orphaned,omitempty"`
	RPM      int64   `json:"rpm,omitempty"`
	RPMLeft  float64 `json:"rpm_left,omitempty"`
	TPM      int64   `json:"tpm,omitempty"`
	TPMLeft  float64 `json:"tpm_left,omitempty"`
	MeanHold string  `json:"mean_hold,omitempty"`
}

func (s *Server) queues(w http.ResponseWriter, r *http.Request) {
	var out QueueView
	for _, st := range s.deps.Engine.Scopes(r.Context()) {
		v := ScopeView{
			Name: st.Name, Limit: st.Config.Limit, InFlight: st.Used, Leases: st.Leases, Waiting: st.Queued,
			Held: st.Held, Orphaned: st.Orphaned, RPM: st.Config.RPM, RPMLeft: st.RPMAvailable,
			TPM: st.Config.TPM, TPMLeft: st.TPMAvailable,
		}
		if st.MeanHold > 0 {
			v.MeanHold = st.MeanHold.Round(time.Millisecond).String()
		}
		out.Scopes = append(out.Scopes, v)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}
