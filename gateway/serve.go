package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/internal/header"
	"github.com/weir-gateway/weir/provider"
	"go.opentelemetry.io/otel/trace"
)

// Executor runs one upstream call: an upstream adapter now, an edge
// node's tunnel later. provider.Adapter implements it.
type Executor interface {
	// Do returns the upstream response for a 2xx answer, or a
	// *provider.Error. The caller closes the body.
	Do(ctx context.Context, c provider.Call) (*http.Response, error)
}

var _ Executor = provider.Adapter(nil)

// Serve takes c on its way: it orders c's candidates, waits for a lease
// on the first that has room, calls its executor under the lease, passes
// the answer to out, and releases the lease once the upstream call is
// torn down — then, within the retry budget, tries the next candidate if
// nothing reached the client. It returns nil once an answer has started
// (out.Start was called); else the error to answer with: an *Error, a
// *RefusedError, or ErrClientGone when nobody is left to answer. c.Usage
// says how it went.
func (s *Service) Serve(ctx context.Context, c *Call, out Answer) error {
	r, err := s.route(ctx, c)
	if r == nil {
		return err
	}
	defer s.releaseEndUsers(r.budgets.common)
	var last *provider.Error
	for attempt := 0; attempt < s.cfg.RetryBudget; attempt++ {
		if len(r.resolve()) == 0 {
			break
		}
		var lease admission.Lease
		var err error
		admitted := false
		if attempt == 0 && c.Model.Affinity == weir.AffinityStrict && r.prefer != "" {
			lease, admitted, err = s.admitPreferred(ctx, c, r)
		}
		if !admitted && err == nil {
			lease, err = s.admit(ctx, c, r, attempt)
		}
		if err != nil {
			s.forgetEndUserWindows(err, r.budgets.common)
			c.end(outcomeOf(err))
			return err
		}
		if r.place == 0 {
			r.place = lease.Place
		}
		retry, done, err := s.serveLease(ctx, c, r, out, &lease, attempt)
		if done {
			return err
		}
		if retry != nil {
			last = retry
		}
	}
	return s.noneServed(c, last)
}

// route is Serve's routing of c: its platform models, its acceptance
// run's scopes, its budgets and its affinity's preferred target. A nil
// routing comes with the error to answer, c's outcome set. It is a
// function of its own, like serveLease, so that Serve's frame, which a
// waiting request holds on its goroutine's stack, has none of their
// locals: a shallower stack while parked is one that stays small.
//
//go:noinline
func (s *Service) route(ctx context.Context, c *Call) (*routing, error) {
	pms, refusal := s.platformModels(c, c.Snapshot, c.Model)
	if c.nativeOnly() && len(pms) == 0 && refusal != nil {
		c.end(codeOutcome(weir.CodeNoCandidate))
		return nil, refusal
	}
	if c.Platform != "" && len(pms) == 0 {
		// No node serves a pinned request: none is left.
		c.end(codeOutcome(weir.CodeNoCandidate))
		return nil, refusal
	}
	if c.RunMode == weir.RunAcceptance {
		if err := s.EnterRun(c.KeyID, c.RunID); err != nil {
			c.end(outcomeOf(err))
			return nil, err
		}
		if err := s.ensureAcceptanceScopes(ctx, pms); err != nil {
			s.logger(c).Error("could not make the acceptance copies of platform models", "run", c.RunID, "error", err)
			err = errorf(ErrInternal, "", "could not make the acceptance copies of the platform models")
			c.end(outcomeOf(err))
			return nil, err
		}
	}
	r := &routing{s: s, c: c, pms: pms}
	budgets, err := s.prepareBudgets(ctx, c.KeyID, c.Group, c.Model.Name, c.Usage.EndUser, pms)
	if err != nil {
		c.end(outcomeOf(err))
		return nil, err
	}
	r.budgets = budgets
	if refusal != nil && len(pms) == 0 && len(r.resolve()) == 0 {
		s.releaseEndUsers(budgets.common)
		c.end(codeOutcome(weir.CodeNoCandidate))
		return nil, refusal
	}
	if r.akey = affinityKeyOf(c); r.akey != "" {
		r.prefer, _ = s.affinity.get(r.akey, s.deps.Clock.Now())
	}
	return r, nil
}

// serveLease serves c's attempt under lease, as Serve says: done, with
// the error to answer (nil once an answer started), or the attempt's
// failure to try the next candidate after (retry; nil if the lease's
// target was gone).
//
//go:noinline
func (s *Service) serveLease(ctx context.Context, c *Call, r *routing, out Answer, lease *admission.Lease, attempt int) (retry *provider.Error, done bool, err error) {
	t, ok := s.admittedTarget(ctx, c, r, *lease)
	if !ok {
		return nil, false, nil
	}
	c.budgets = r.budgets.needs(t.pm)
	up := s.upstreamOf(c, t)
	c.Usage.PlatformModel = up.Name
	if c.RunMode == weir.RunAcceptance {
		c.Usage.PlatformModel = acceptancePrefix + c.RunID + ":" + up.Name
	}
	s.journal(c, *lease)
	retry, err = s.tracedAttempt(ctx, c, out, *lease, up, attempt)
	if retry == nil {
		if err == nil && r.akey != "" {
			s.rememberAffinity(c, r.akey, r.prefer, t.name())
		}
		return nil, true, err
	}
	s.handoff(c, t, retry)
	if until, paused := s.pausedUntil(t.pm); t.node == nil && paused && (c.Deadline.IsZero() || until.Before(c.Deadline)) {
		// Paused, not failed: the request waits for it again (or
		// goes to a candidate that has room first).
		return retry, false, nil
	}
	r.failed(t)
	return retry, false, nil
}

// noneServed is the answer to c when no attempt served it: last is the
// last attempt's failure, nil if none was made.
func (s *Service) noneServed(c *Call, last *provider.Error) error {
	if last != nil && last.Pauses() {
		// The last upstream said when to come back, past this request's
		// deadline: so does the answer.
		return s.pausedError(c, s.deps.Clock.Now().Add(min(last.RetryAfter, maxPause)))
	}
	if last == nil || errors.Is(last, weir.ErrNodeGone) {
		c.end(codeOutcome(weir.CodeNoCandidate))
		return errorf(ErrNoCandidate, "model", fmt.Sprintf("no platform can serve %q right now", c.Model.Name))
	}
	category := ErrUpstream
	if last.Timeout {
		category = ErrUpstreamTimeout
	}
	err := &Error{Category: category, Message: "every upstream attempt failed; last: " + last.Error(), RetryAfter: last.RetryAfter, Err: last}
	c.end(outcomeOf(err))
	return err
}

// handoff records, if c leaves t for the next candidate because t is an
// edge node's provider whose run stalled (retry), the handoff in c's
// usage record (weir.Usage.Handoff) and the log.
func (s *Service) handoff(c *Call, t target, retry error) {
	if t.node == nil || !errors.Is(retry, weir.ErrNodeStalled) {
		return
	}
	const why = "stalled"
	mark := why + " " + t.name()
	if c.Usage.Handoff != "" {
		mark = c.Usage.Handoff + ", " + mark
	}
	c.Usage.Handoff = mark
	s.logger(c).Warn("an edge node's run handed off to the next candidate", "handoff", why, "node", t.node.Node,
		"provider", t.node.Provider, "generation", t.node.Gen)
}

// admitPreferred admits c on the target its strict affinity prefers
// alone, waiting for it up to the model's AffinityWait (or c's own
// deadline, if sooner). admitted is false, with no error, when that wait
// ran out first: any candidate may serve then.
func (s *Service) admitPreferred(ctx context.Context, c *Call, r *routing) (admission.Lease, bool, error) {
	r.only = r.prefer
	anyTarget := func() (admission.Lease, bool, error) {
		r.only = ""
		r.resolve() // every target again, for the admission after this
		return admission.Lease{}, false, nil
	}
	if ts := r.resolve(); len(ts) != 1 || ts[0].name() != r.prefer {
		return anyTarget() // it is gone: any may serve
	}
	deadline := c.Deadline
	bound := s.deps.Clock.Now().Add(affinityWait(c.Model))
	shortened := deadline.IsZero() || bound.Before(deadline)
	if shortened {
		c.Deadline = bound
	}
	lease, err := s.admit(ctx, c, r, -1)
	c.Deadline = deadline
	if err != nil && shortened && errors.Is(err, ErrQueueTimeout) {
		return anyTarget()
	}
	r.only = ""
	return lease, err == nil, err
}

// rememberAffinity records that target served c (its affinity key key),
// and counts whether that is where the table sent it.
func (s *Service) rememberAffinity(c *Call, key, prefer, target string) {
	result := affinityNew
	switch {
	case prefer == target:
		result = affinityHit
	case prefer != "":
		result = affinityMiss
	}
	if s.affinity.put(key, target, s.deps.Clock.Now(), false) && s.deps.Affinity != nil {
		s.deps.Affinity.ShareAffinity(key, target)
	}
	s.deps.Metrics.Affinity(c.Model.Name, result)
}

// learnAffinity records what another replica shared: target served key.
func (s *Service) learnAffinity(key, target string) {
	s.affinity.put(key, target, s.deps.Clock.Now(), true)
}

// pausedError answers a request whose candidates are all paused past its
// deadline: 429 rate_limited, to come back when the first resumes.
func (s *Service) pausedError(c *Call, until time.Time) error {
	c.end(codeOutcome(weir.CodeRateLimited))
	wait := max(until.Sub(s.deps.Clock.Now()), time.Second)
	return &Error{Category: ErrRateLimited, RetryAfter: wait, NoRetry: c.MaxWaitAskedBy != "",
		Message: "the upstreams of " + c.Model.Name + " asked the gateway to wait (429 with Retry-After) past this request's deadline"}
}

// admit waits for a lease on the first of order's platform models that has
// room. A request whose rate window opens only after its deadline is
// answered 429 at once rather than left to time out.
func (s *Service) admit(ctx context.Context, c *Call, r *routing, attempt int) (admission.Lease, error) {
	start := s.deps.Clock.Now()
	if until, paused := s.allPausedPast(r.current(), c.Deadline); paused {
		return admission.Lease{}, s.pausedError(c, until)
	}
	lease, w, err := s.tryAdmit(ctx, c, r, attempt)
	if err == nil {
		// Admitted at once: it did not queue, however long the engine's
		// answer took on a busy machine.
		return lease, s.admitted(ctx, c, 0, nil, &lease, nil)
	}
	// A traced request's wait, as it did not get its lease at once.
	ctx, span := startQueueSpan(ctx, c, r, attempt)
	if rerr := rateLimitedPastDeadline(c, start, err); rerr != nil {
		if span != nil {
			endQueueSpan(span, lease, rerr)
		}
		return lease, rerr
	}
	if w != nil {
		lease, err = s.await(ctx, w, span)
	}
	return lease, s.admitted(ctx, c, s.deps.Clock.Now().Sub(start), span, &lease, err)
}

// tryAdmit asks the engine for a lease for c's attempt at once; if it
// would wait, it also returns the wait to queue it with (await). It is
// not admit's own code so that the admission request it builds and
// passes by value takes no room in admit's frame, which a waiting
// request holds on its stack.
//
//go:noinline
func (s *Service) tryAdmit(ctx context.Context, c *Call, r *routing, attempt int) (admission.Lease, *wait, error) {
	areq := admission.Request{
		ID:          c.RequestID + "/" + strconv.Itoa(attempt),
		Priority:    c.Priority,
		FairnessKey: c.KeyID,
		Deadline:    c.Deadline,
		Candidates:  r.candidates(r.current()),
		Hold:        s.holdOf(c, r.current()),
		Place:       r.place,
	}
	if s.deps.Nodes != nil {
		// Nodes come and go while the request waits: the engine asks for
		// its candidates again when a scope it uses changes.
		areq.Resolve = func(string) ([]admission.Candidate, error) { return r.candidates(r.resolve()), nil }
	}
	lease, err := s.deps.Engine.TryAcquire(ctx, areq)
	if !errors.Is(err, admission.ErrWouldWait) && !errors.Is(err, admission.ErrRateLimited) {
		return lease, nil, err
	}
	if areq.Resolve != nil {
		// A fleet's leader resolves a waiter of another replica
		// from this (ResolveSpec); only a waiter needs it.
		areq.Spec = r.spec()
	}
	return lease, &wait{c: c, r: r, base: areq.ID, req: areq, st: c.Snapshot}, err
}

// admitted ends admit's wait, of waited, in lease or err: it counts the
// wait, and returns the error to answer (admissionError), if any.
func (s *Service) admitted(ctx context.Context, c *Call, waited time.Duration, span trace.Span, lease *admission.Lease, err error) error {
	c.Waited += waited
	if err == nil {
		s.deps.Metrics.ObserveQueueWait(c.Model.Name, waited)
	} else {
		err = s.admissionError(ctx, c, err)
	}
	if span != nil {
		endQueueSpan(span, *lease, err)
	}
	return err
}

// rateLimitedPastDeadline is the answer to err, a refusal at start, if
// it is a rate limit whose window opens only after c's deadline: 429 at
// once. Retry-After says when the window opens; a request that set its
// own max wait is still told not to retry on its own (Error.NoRetry).
func rateLimitedPastDeadline(c *Call, start time.Time, err error) *Error {
	var rl *admission.RateLimitedError
	if !errors.As(err, &rl) || c.Deadline.IsZero() || !start.Add(rl.RetryAfter).After(c.Deadline) {
		return nil
	}
	return &Error{Category: ErrRateLimited, Message: "rate limit reached for " + c.Model.Name, RetryAfter: rl.RetryAfter,
		NoRetry: c.MaxWaitAskedBy != "", Err: err}
}

// holdOf bounds how long the work of a lease for one of ts runs once
// granted (admission.Request.Hold): the longest call timeout among them
// (the platform's, or the server's, which is also an edge node's), or no
// bound if one of them has none. A fleet keeps a silent replica's lease
// held that long.
func (s *Service) holdOf(c *Call, ts []target) time.Duration {
	var hold time.Duration
	for _, t := range ts {
		d := s.cfg.UpstreamCallTimeout
		if st := c.Snapshot; st != nil && t.node == nil {
			if pd, ok := st.callTimeouts[st.pms[t.pm].Platform]; ok {
				d = pd
			}
		}
		if d <= 0 {
			return 0
		}
		hold = max(hold, d)
	}
	return hold
}

// admissionError is the one mapping from the engine's errors to the
// service's, for a request that was not admitted.
func (s *Service) admissionError(ctx context.Context, c *Call, err error) error {
	var (
		tl *admission.TokenLimitError
		be *admission.BudgetExceededError
	)
	switch {
	case ctx.Err() != nil:
		return ErrClientGone
	case errors.As(err, &be):
		return s.budgetExceeded(be)
	case errors.Is(err, admission.ErrTimeout):
		own := fmt.Sprintf("the gateway's default max wait (default_max_wait %s)", c.MaxWait)
		if c.MaxWaitAskedBy != "" {
			own = fmt.Sprintf("the request's own max wait (%s %s)", c.MaxWaitAskedBy, c.MaxWait)
		}
		return queueTimeout(c.Model.Name, c.Waited, own, c.MaxWaitAskedBy != "", err)
	case errors.Is(err, admission.ErrQueueFull):
		return queueFull(c.Model.Name, err)
	case errors.As(err, &tl):
		param := ""
		if c.MaxTokens > 0 {
			param = "max_tokens"
		}
		return tooManyTokens(c.Model.Name, param, tl)
	case errors.Is(err, admission.ErrNoCandidate), errors.Is(err, admission.ErrUnknownScope):
		return &Error{Category: ErrNoCandidate, Param: "model", Message: "no platform can serve " + c.Model.Name + " right now", Err: err}
	case errors.Is(err, admission.ErrCancelled):
		return &Error{Category: ErrNoCandidate, Message: "an operator removed this request from the queue of " + c.Model.Name, Err: err}
	case errors.Is(err, admission.ErrClosed):
		return &Error{Category: ErrNoCandidate, Message: "the gateway is shutting down", Err: err}
	case errors.Is(err, admission.ErrUnavailable):
		s.logger(c).Warn("admission unavailable", "error", err)
		return &Error{Category: ErrUnavailable, Message: "the gateway cannot admit requests right now: its fleet has no leader it can reach; retry shortly", RetryAfter: time.Second, Err: err}
	}
	s.logger(c).Error("admission failed", "error", err)
	return &Error{Category: ErrInternal, Message: "admission failed", Err: err}
}

// attempt calls one upstream under lease. It returns a retryable
// *provider.Error (having passed nothing to out) when another candidate
// should be tried; else what Serve returns. The lease is renewed while
// the call runs (if it can expire) and released once the upstream call is
// over — its body closed and its connection torn down — and before
// anything is written to the client that no longer needs the upstream;
// whatever happens, it is released before attempt returns.
func (s *Service) attempt(ctx context.Context, c *Call, out Answer, lease admission.Lease, pm upstream) (*provider.Error, error) {
	hold := s.hold(ctx, c, lease)
	defer hold.release()
	path, from, native := c.Path, c.Body, pm.speaks(c)
	if native {
		path, from = c.Native.Path, c.Native.Body
	}
	call, err := upstreamCall(from, pm.Upstream)
	if err != nil {
		c.end(codeOutcome(weir.CodeInternal))
		return nil, &Error{Category: ErrInternal, Message: "could not encode the upstream request", Err: err}
	}
	call.Path, call.Stream, call.Header = path, c.Stream, c.Header
	t0 := s.deps.Clock.Now()
	s.startObs(c, &hold.obs, pm, t0)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		s.noteAttempt(span, c, call.Body)
	}
	defer func() { c.Upstream += c.obs.end.Sub(t0) }()
	resp, err := pm.ex.Do(ctx, call)
	if call.Upload != nil {
		_ = call.Upload.Body.Close()
	}
	if err != nil {
		c.obs.end = s.deps.Clock.Now()
		s.settleRefused(hold.ctx, c, lease, err)
		return s.callFailed(ctx, c, pm, t0, err)
	}
	headersIn := s.deps.Clock.Now().Sub(t0)

	// done ends the upstream call and gives the lease back, having
	// settled its tokens and its cost against what the answer reported
	// (or the estimate): at the end of the upstream's answer, not the
	// client's. A budget's reservation settles here, to cost.
	finished := false
	done := func(u usage, got bool) {
		if finished {
			return
		}
		finished = true
		_ = resp.Body.Close()
		c.obs.ended(s.deps.Clock.Now(), u, got)
		cost, estimated := c.attemptCost(pm, u, got)
		c.addCost(cost, estimated)
		if !got {
			u = usage{PromptTokens: c.tokensIn(pm.tokenizer)}
		}
		c.Usage.PromptTokens, c.Usage.CompletionTokens, c.Usage.CachedTokens = u.PromptTokens, u.CompletionTokens, u.CachedTokens
		s.settle(hold.ctx, c, lease, u.total(), cost)
		hold.release()
		s.checkAlerts(c.budgets)
	}
	defer done(usage{}, false)
	head := headOf(c, resp)
	if native {
		head.Native, head.Platform = true, pm.Platform
	}
	var d delivery
	if c.Stream {
		// The estimate less max_tokens is the input's.
		d = s.stream(out, resp, head, max(c.tokensIn(pm.tokenizer)-c.MaxTokens, 0), c.obs, done)
	} else {
		d = s.copyBody(c, out, resp, head, done)
	}
	return s.delivered(ctx, c, pm, d, headersIn)
}

// upstreamCall is the call that sends body, its model rewritten to
// upstream: as JSON, or as the form of an Uploader.
func upstreamCall(body Body, upstream string) (provider.Call, error) {
	if u, ok := body.(Uploader); ok {
		up, err := u.Upload(upstream)
		return provider.Call{Upload: up}, err
	}
	b, err := body.WithModel(upstream)
	return provider.Call{Body: b}, err
}

// callFailed answers an upstream call (to pm, begun at t0) that returned
// err instead of a response: a retryable *provider.Error when another
// candidate should be tried (pm paused itself, or failed), else what
// Serve returns (the upstream's refusal, passed on).
func (s *Service) callFailed(ctx context.Context, c *Call, pm upstream, t0 time.Time, err error) (*provider.Error, error) {
	if ctx.Err() != nil {
		c.end(OutcomeCancelled)
		return nil, ErrClientGone
	}
	var pe *provider.Error
	if !errors.As(err, &pe) {
		pe = &provider.Error{Err: err}
	}
	s.observeCall(c, pm, callOutcome(pe), c.obs.end.Sub(t0))
	if pm.pausable && pe.Pauses() {
		// Not a failure of the upstream's: it said when to come back.
		s.pauseUpstream(s.logger(c), pm.Name, pe.RetryAfter)
		return pe, nil
	}
	if pe.Retryable() {
		s.upstreamFailed(c, pm, pe, "trying the next candidate")
		return pe, nil
	}
	// The client's request was refused upstream: pass the answer on.
	c.end(refusedOutcome(pe.Status))
	if pe.Credential {
		// Never the client's to see (the adapter marks it
		// retryable, so it does not come here; this holds the line
		// if it did).
		return nil, &Error{Category: ErrUpstream, Message: "the upstream refused the gateway's credential for it", Err: pe}
	}
	return nil, &RefusedError{Status: pe.Status, Body: pe.Body}
}

// headOf is the head of the answer to c that passes resp on.
func headOf(c *Call, resp *http.Response) Head {
	return Head{
		Status:             resp.StatusCode,
		ContentType:        header.Get(resp.Header, "Content-Type"),
		ContentDisposition: header.Get(resp.Header, "Content-Disposition"),
		CacheControl:       header.Get(resp.Header, "Cache-Control"),
		ContentLength:      -1,
		Waited:             c.Waited,
	}
}

// delivered ends c's attempt on pm, whose answer's headers came in after
// headersIn, by how passing that answer on went (d): it counts the
// upstream call, files c's outcome and returns what attempt returns.
func (s *Service) delivered(ctx context.Context, c *Call, pm upstream, d delivery, headersIn time.Duration) (*provider.Error, error) {
	if !d.started && d.err == nil && ctx.Err() != nil {
		c.end(OutcomeCancelled)
		return nil, ErrClientGone // the client is gone; nobody reads the answer
	}
	switch {
	case d.upstream != nil:
		return s.upstreamBroke(c, pm, d.upstream, d.started, headersIn)
	case d.outcome != "":
		s.observeCall(c, pm, d.outcome, headersIn)
		c.end(d.outcome)
		return nil, d.err
	}
	s.deps.Router.Success(pm.health)
	s.observeCall(c, pm, OutcomeOK, headersIn)
	switch {
	case d.complete:
		c.end(OutcomeOK)
	case errors.Is(d.client, os.ErrDeadlineExceeded):
		// (The server cancels the request's context once a write fails,
		// so the context cannot tell this from a client that left.)
		c.end(OutcomeClientWriteTimeout)
	default:
		c.end(OutcomeCancelled)
	}
	if !d.started {
		return nil, ErrClientGone
	}
	return nil, nil
}

// upstreamBroke ends c's attempt on pm, whose answer failed (pe) after
// its headers came in: retryable when nothing reached the client
// (started is false) and pe allows it; else cut short, with an error to
// answer with if the answer had not started. A pe that Pauses pauses pm
// (and is not counted against its health, as in callFailed).
func (s *Service) upstreamBroke(c *Call, pm upstream, pe *provider.Error, started bool, headersIn time.Duration) (*provider.Error, error) {
	s.observeCall(c, pm, callOutcome(pe), headersIn)
	// An overload or a rate limit met mid-answer pauses pm as one met
	// before it does: the next requests go elsewhere or wait.
	paused := pm.pausable && pe.Pauses()
	if paused {
		s.pauseUpstream(s.logger(c), pm.Name, pe.RetryAfter)
	}
	if !started && pe.Retryable() {
		// Nothing reached the client: another candidate may serve.
		if !paused {
			s.upstreamFailed(c, pm, pe, "trying the next candidate")
		}
		return pe, nil
	}
	if !paused {
		s.upstreamFailed(c, pm, pe, "the answer was cut short")
	}
	c.end(OutcomeUpstreamBroken)
	if pe.Timeout {
		c.end(codeOutcome(weir.CodeUpstreamTimeout))
	}
	if started {
		return nil, nil
	}
	category := ErrUpstream
	if pe.Timeout {
		category = ErrUpstreamTimeout
	}
	return nil, &Error{Category: category, Message: "the upstream failed: " + pe.Error(), Err: pe}
}

// upstreamFailed counts a retryable upstream failure against pm's health
// and logs it; next says what happens now. A refused credential is
// logged with the platform's name and without the upstream's words.
func (s *Service) upstreamFailed(c *Call, pm upstream, pe *provider.Error, next string) {
	s.deps.Router.Failure(pm.health)
	if pe.Credential {
		s.logger(c).Warn("the platform refused its credential; "+next, "platform", pm.Platform, "platform_model", pm.Name, "status", pe.Status)
		return
	}
	s.logger(c).Warn("upstream failed; "+next, "platform", pm.Platform, "platform_model", pm.Name, "error", pe.Error())
}

// dropped logs and counts an error that cannot change the request's
// answer: op names what failed.
func (s *Service) dropped(c *Call, op, msg string, err error) {
	s.deps.Metrics.DroppedError(op)
	s.logger(c).Warn(msg, "error", err)
}
