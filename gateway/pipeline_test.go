package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/provider"
)

// execFunc is a fake Executor standing in for a platform's adapter.
type execFunc func(ctx context.Context, c provider.Call) (*http.Response, error)

func (f execFunc) Do(ctx context.Context, c provider.Call) (*http.Response, error) { return f(ctx, c) }

// setExec makes f the executor of platform in the served catalog.
func (b *testBundle) setExec(platform string, f execFunc) {
	b.svc.Snapshot().adapters[platform] = f
}

// holdExec makes platform's calls wait: started is closed when a call
// arrives, and closing finish lets it answer okBody.
func (b *testBundle) holdExec(platform string) (started, finish chan struct{}) {
	started, finish = make(chan struct{}), make(chan struct{})
	b.setExec(platform, func(context.Context, provider.Call) (*http.Response, error) {
		close(started)
		<-finish
		resp, _ := answerWith("application/json", strings.NewReader(okBody))
		return resp, nil
	})
	return started, finish
}

// counted is f counting its calls in n.
func counted(n *atomic.Int32, f execFunc) execFunc {
	return func(ctx context.Context, c provider.Call) (*http.Response, error) {
		n.Add(1)
		return f(ctx, c)
	}
}

func failWith(pe *provider.Error) execFunc {
	return func(context.Context, provider.Call) (*http.Response, error) { return nil, pe }
}

// answerWith answers contentType body r, whose Close is recorded.
func answerWith(contentType string, r io.Reader) (*http.Response, *trackedBody) {
	tb := &trackedBody{r: r}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {contentType}},
		ContentLength: -1, Body: tb}, tb
}

func okJSON(body string) execFunc {
	return func(context.Context, provider.Call) (*http.Response, error) {
		resp, _ := answerWith("application/json", strings.NewReader(body))
		return resp, nil
	}
}

type trackedBody struct {
	r      io.Reader
	closed atomic.Int32
}

func (t *trackedBody) Read(p []byte) (int, error) { return t.r.Read(p) }
func (t *trackedBody) Close() error {
	t.closed.Add(1)
	return nil
}

// chunks reads its parts one per Read, then err (io.EOF if nil).
type chunks struct {
	parts []string
	err   error
}

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.parts) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		return 0, io.EOF
	}
	n := copy(p, c.parts[0])
	c.parts = c.parts[1:]
	return n, nil
}

const okBody = `{"id":"x","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":6,"total_tokens":10}}`

// assertIdle fails unless no scope of the catalog holds a lease or a waiter.
func (b *testBundle) assertIdle(t *testing.T) {
	t.Helper()
	for _, pm := range []string{"up/m", "up2/m"} {
		st, err := b.engine.Scope(context.Background(), weir.PlatformModelScope(pm))
		if err != nil {
			continue
		}
		if st.Used != 0 || st.Leases != 0 || st.Queued != 0 {
			t.Errorf("%s after the request: %+v; want nothing held or queued", pm, st)
		}
	}
}

// serveAsync runs Serve in a goroutine; the channel gets its error.
func (b *testBundle) serveAsync(ctx context.Context, c *Call, out Answer) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- b.svc.Serve(ctx, c, out) }()
	return ch
}

// hold takes the one slot of scope up/m (limited to 1) for the test.
func (b *testBundle) holdSlot(t *testing.T) admission.Lease {
	t.Helper()
	if err := b.engine.SetScope(t.Context(), weir.PlatformModelScope("up/m"), admission.ScopeConfig{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	l, err := b.engine.TryAcquire(t.Context(), admission.Request{ID: "holder", Candidates: []admission.Candidate{
		{Needs: []admission.Need{{Scope: weir.PlatformModelScope("up/m"), Amount: 1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	<-b.events // its admission
	return l
}

// TestServeAdmittedAtOnce: with room, a request never queues: it waits
// for nothing and its answer says so.
func TestServeAdmittedAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	c := b.chat(t)
	var out recordedAnswer
	if err := b.svc.Serve(t.Context(), c, &out); err != nil {
		t.Fatal(err)
	}
	if e := b.waitEvent(t, admission.OutcomeAdmitted); e.Waited != 0 {
		t.Errorf("admitted after waiting %s", e.Waited)
	}
	if c.Waited != 0 || out.head.Waited != 0 || c.Usage.PlatformModel != "up/m" {
		t.Errorf("waited %s (head %s), served by %q", c.Waited, out.head.Waited, c.Usage.PlatformModel)
	}
	b.assertIdle(t)
}

// steppingClock is a fake clock that moves a millisecond at each read of
// the time, as a real one moves between reads.
type steppingClock struct {
	*clock.Fake
	reads atomic.Int64
}

func (c *steppingClock) Now() time.Time {
	return c.Fake.Now().Add(time.Duration(c.reads.Add(1)) * time.Millisecond)
}

// TestServeAdmittedAtOnceWaitsNothing: a request admitted at once waited
// for nothing, however far the clock moves while the engine answers.
func TestServeAdmittedAtOnceWaitsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{clock: func(f *clock.Fake) clock.Clock { return &steppingClock{Fake: f} }})
	c := b.chat(t)
	var out recordedAnswer
	if err := b.svc.Serve(t.Context(), c, &out); err != nil {
		t.Fatal(err)
	}
	if c.Waited != 0 || out.head == nil || out.head.Waited != 0 {
		t.Errorf("waited %s (head %+v), want 0", c.Waited, out.head)
	}
}

// TestServeQueuedThenAdmittedOnRelease: a request finding no room waits
// in the queue, and is served when the slot's holder releases it; the
// wait it had is on its answer.
func TestServeQueuedThenAdmittedOnRelease(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: onlyUp})
	held := b.holdSlot(t)
	c := b.chat(t)
	var out recordedAnswer
	done := b.serveAsync(t.Context(), c, &out)
	b.waitEvent(t, admission.OutcomeQueued)
	select {
	case err := <-done:
		t.Fatalf("Serve returned %v while the slot was held", err)
	default:
	}
	b.clock.Advance(5 * time.Second)
	if err := b.engine.Release(t.Context(), held.ID, held.Owner); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if c.Waited != 5*time.Second || out.head == nil || out.head.Waited != 5*time.Second || c.Usage.Outcome != "ok" {
		t.Errorf("waited %s, head %+v, outcome %q; want 5s and ok", c.Waited, out.head, c.Usage.Outcome)
	}
	b.assertIdle(t)
}

// TestServeFallsBack: a retryable failure of the first candidate, before
// anything reached the client, sends the request to the next one, under
// a lease of its own; the first's is given back.
func TestServeFallsBack(t *testing.T) {
	t.Parallel()
	for name, first := range map[string]execFunc{
		"503":           failWith(&provider.Error{Status: 503, Body: []byte("busy")}),
		"connect error": failWith(&provider.Error{Err: errors.New("connection refused")}),
		"timeout reading json": func(context.Context, provider.Call) (*http.Response, error) {
			resp, _ := answerWith("application/json", &chunks{parts: []string{`{"id":`}, err: &provider.Error{Timeout: true, Err: os.ErrDeadlineExceeded}})
			return resp, nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{})
			var n1, n2 atomic.Int32
			b.setExec("up", counted(&n1, first))
			b.setExec("up2", counted(&n2, okJSON(okBody)))
			c := b.chat(t)
			var out recordedAnswer
			if err := b.svc.Serve(t.Context(), c, &out); err != nil {
				t.Fatal(err)
			}
			if n1.Load() != 1 || n2.Load() != 1 {
				t.Errorf("calls: up %d, up2 %d; want one each", n1.Load(), n2.Load())
			}
			if c.Usage.PlatformModel != "up2/m" || c.Usage.Outcome != "ok" || out.body.String() != okBody {
				t.Errorf("usage %+v, body %q", c.Usage, out.body.String())
			}
			if c.Usage.PromptTokens != 4 || c.Usage.CompletionTokens != 6 {
				t.Errorf("tokens %d+%d; want the answer's 4+6", c.Usage.PromptTokens, c.Usage.CompletionTokens)
			}
			b.assertIdle(t)
		})
	}
}

// TestServeEveryAttemptFails: when every candidate fails, the answer is
// the last failure's category, with its Retry-After; the retry budget
// bounds the attempts.
func TestServeEveryAttemptFails(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		pe       *provider.Error
		budget   int
		want     error
		attempts int32
	}{
		{"503", &provider.Error{Status: 503, RetryAfter: 7 * time.Second}, 0, ErrUpstream, 2},
		{"timeout", &provider.Error{Timeout: true, Err: os.ErrDeadlineExceeded}, 0, ErrUpstreamTimeout, 2},
		{"budget of one", &provider.Error{Status: 502}, 1, ErrUpstream, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{cfg: Config{RetryBudget: tc.budget}})
			var n atomic.Int32
			b.setExec("up", counted(&n, failWith(tc.pe)))
			b.setExec("up2", counted(&n, failWith(tc.pe)))
			c := b.chat(t)
			var out recordedAnswer
			err := b.svc.Serve(t.Context(), c, &out)
			var ge *Error
			if !errors.Is(err, tc.want) || !errors.As(err, &ge) || ge.RetryAfter != tc.pe.RetryAfter {
				t.Fatalf("Serve: %v; want %v with Retry-After %s", err, tc.want, tc.pe.RetryAfter)
			}
			if n.Load() != tc.attempts || out.head != nil || c.Usage.Outcome != tc.want.Error() {
				t.Errorf("attempts %d (want %d), head %+v, outcome %q", n.Load(), tc.attempts, out.head, c.Usage.Outcome)
			}
			b.assertIdle(t)
		})
	}
}

// TestServeRefusedPassedOn: an upstream's 4xx refusal of the client's
// request is the client's: passed on as a RefusedError, no other
// candidate tried.
func TestServeRefusedPassedOn(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	body := `{"error":{"message":"bad messages","type":"invalid_request_error"}}`
	var n2 atomic.Int32
	b.setExec("up", failWith(&provider.Error{Status: 400, Body: []byte(body)}))
	b.setExec("up2", counted(&n2, okJSON(okBody)))
	c := b.chat(t)
	err := b.svc.Serve(t.Context(), c, &recordedAnswer{})
	var re *RefusedError
	if !errors.As(err, &re) || re.Status != 400 || string(re.Body) != body {
		t.Fatalf("Serve: %v; want the upstream's 400 passed on", err)
	}
	if n2.Load() != 0 || c.Usage.Outcome != "upstream_400" {
		t.Errorf("second candidate called %d times, outcome %q", n2.Load(), c.Usage.Outcome)
	}
	b.assertIdle(t)
}

// TestServeCredentialRefusal: a platform refusing its own credential is
// the operator's to fix: the next candidate is tried, and if none serves
// the client reads Weir's words, never the upstream's (which may quote
// the key), nor do the logs.
func TestServeCredentialRefusal(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	const secret = "sk-live-0123456789"
	pe := &provider.Error{Status: 401, Credential: true, Body: []byte(`{"error":"bad key ` + secret + `"}`)}
	var n atomic.Int32
	b.setExec("up", counted(&n, failWith(pe)))
	b.setExec("up2", counted(&n, failWith(pe)))
	c := b.chat(t)
	err := b.svc.Serve(t.Context(), c, &recordedAnswer{})
	var re *RefusedError
	if !errors.Is(err, ErrUpstream) || errors.As(err, &re) || n.Load() != 2 {
		t.Fatalf("Serve: %v after %d attempts; want ErrUpstream after 2", err, n.Load())
	}
	if msg := err.Error(); strings.Contains(msg, secret) || !strings.Contains(msg, "refused its credential") {
		t.Errorf("message %q", msg)
	}
	if l := b.logs.String(); strings.Contains(l, secret) || !strings.Contains(l, "refused its credential") {
		t.Errorf("logs: %s", l)
	}
}

// TestServeStreamReconcilesUsage: a stream is passed through as it came,
// and the lease's tokens are settled against the usage it reported, or,
// when it reported none, the prompt's estimate and about one token a
// chunk: a client cannot get past a TPM limit by streaming without
// asking for usage.
func TestServeStreamReconcilesUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		parts      []string
		want       int64
		prompt     int64
		completion int64
		maxTokens  int64
	}{
		{"usage chunk", []string{
			"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
			"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":30,\"total_tokens\":37}}\n",
			"\ndata: [DONE]\n\n"}, 37, 7, 30, 0},
		{"no usage", []string{"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\r\n\r\n",
			"data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\ndata: {\"choices\":[{\"delta\":", "{}}]}\n\n",
			"data: [DONE]\n\n"}, 13, 10, 3, 0},
		{"no usage, max_tokens", []string{"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n", "data: [DONE]\n\n"},
			4 + 1, 4, 1, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{catalog: func(c *weir.Catalog) {
				onlyUp(c)
				c.PlatformModels[0].TPM = 1000
			}})
			var tb *trackedBody
			b.setExec("up", func(_ context.Context, call provider.Call) (*http.Response, error) {
				if !call.Stream {
					t.Error("the call is not a stream")
				}
				var resp *http.Response
				resp, tb = answerWith("text/event-stream", &chunks{parts: slicesClone(tc.parts)})
				return resp, nil
			})
			c := b.chat(t)
			c.Stream, c.MaxTokens = true, tc.maxTokens
			var out recordedAnswer
			if err := b.svc.Serve(t.Context(), c, &out); err != nil {
				t.Fatal(err)
			}
			if got, want := out.body.String(), strings.Join(tc.parts, ""); got != want || out.head.ContentType != "text/event-stream" {
				t.Errorf("stream passed as %q (%+v); want %q", got, out.head, want)
			}
			if c.Usage.Outcome != "ok" || c.Usage.PromptTokens != tc.prompt || c.Usage.CompletionTokens != tc.completion {
				t.Errorf("usage %+v", c.Usage)
			}
			if left := b.scope(t, weir.PlatformModelScope("up/m")).TPMAvailable; left != float64(1000-tc.want) {
				t.Errorf("tpm left %v; want %d (settled to %d, not the estimate %d)", left, 1000-tc.want, tc.want, c.Tokens)
			}
			if tb.closed.Load() != 1 {
				t.Errorf("upstream body closed %d times", tb.closed.Load())
			}
			b.assertIdle(t)
		})
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// TestServeStreamBrokenOrTimedOut: a stream the upstream ends without
// finishing it is counted broken, and one whose upstream times out
// mid-stream is ended with an error event in the timeout's category; the
// next candidate is not tried once the answer started.
func TestServeStreamBrokenOrTimedOut(t *testing.T) {
	t.Parallel()
	first := "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
	for _, tc := range []struct {
		name      string
		err       error
		outcome   string
		streamErr error
	}{
		{"cut short", nil, "upstream_broken", nil},
		{"idle timeout", &provider.Error{Timeout: true, Err: os.ErrDeadlineExceeded}, "upstream_timeout", ErrUpstreamTimeout},
		{"connection reset", &provider.Error{Err: errors.New("connection reset")}, "upstream_broken", ErrUpstream},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{})
			var n2 atomic.Int32
			b.setExec("up", func(context.Context, provider.Call) (*http.Response, error) {
				resp, _ := answerWith("text/event-stream", &chunks{parts: []string{first}, err: tc.err})
				return resp, nil
			})
			b.setExec("up2", counted(&n2, okJSON(okBody)))
			c := b.chat(t)
			c.Stream = true
			var out recordedAnswer
			if err := b.svc.Serve(t.Context(), c, &out); err != nil {
				t.Fatalf("Serve after the stream started: %v", err)
			}
			if out.body.String() != first || c.Usage.Outcome != tc.outcome || n2.Load() != 0 {
				t.Errorf("body %q, outcome %q (want %q), next candidate called %d", out.body.String(), c.Usage.Outcome, tc.outcome, n2.Load())
			}
			if (tc.streamErr == nil) != (out.streamE == nil) || (tc.streamErr != nil && !errors.Is(out.streamE, tc.streamErr)) {
				t.Errorf("stream error %v; want %v", out.streamE, tc.streamErr)
			}
			b.assertIdle(t)
		})
	}
}

// TestServeStreamWholeBeforeClientLeft: a client that hangs up right
// after [DONE] (as SDKs do) had the whole answer, though the upstream's
// body had not ended yet: the request is served, not cancelled.
func TestServeStreamWholeBeforeClientLeft(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	parts := []string{
		"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
		"data: [DONE]\n\n",
	}
	b.setExec("up", func(context.Context, provider.Call) (*http.Response, error) {
		// The hang-up comes as the read after [DONE] failing for it.
		resp, _ := answerWith("text/event-stream", &chunks{parts: slicesClone(parts), err: context.Canceled})
		return resp, nil
	})
	c := b.chat(t)
	c.Stream = true
	var out recordedAnswer
	if err := b.svc.Serve(t.Context(), c, &out); err != nil {
		t.Fatal(err)
	}
	if out.body.String() != strings.Join(parts, "") || c.Usage.Outcome != "ok" || out.streamE != nil {
		t.Errorf("body %q, outcome %q, stream error %v; want the whole stream, ok", out.body.String(), c.Usage.Outcome, out.streamE)
	}
	b.assertIdle(t)
}

// TestServeStalledUpstreamTimesOut: an upstream that stalls until its
// timeout (on the injected clock) fires is a failed attempt: the next
// candidate serves, and its stall held the first's lease only until then.
func TestServeStalledUpstreamTimesOut(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	armed := make(chan struct{})
	b.setExec("up", func(ctx context.Context, _ provider.Call) (*http.Response, error) {
		fired := make(chan struct{})
		b.clock.AfterFunc(30*time.Second, func() { close(fired) })
		close(armed)
		select {
		case <-fired:
			return nil, &provider.Error{Timeout: true, Err: os.ErrDeadlineExceeded}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	b.setExec("up2", okJSON(okBody))
	c := b.chat(t)
	var out recordedAnswer
	done := b.serveAsync(t.Context(), c, &out)
	<-armed
	if st := b.scope(t, weir.PlatformModelScope("up/m")); st.Leases != 1 {
		t.Errorf("stalled call holds %d leases", st.Leases)
	}
	b.clock.Advance(30 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if c.Usage.PlatformModel != "up2/m" || c.Usage.Outcome != "ok" {
		t.Errorf("usage %+v", c.Usage)
	}
	b.assertIdle(t)
}

// TestServeAnswerCap: a JSON answer over MaxResponseBytes is refused
// before anything reaches the client.
func TestServeAnswerCap(t *testing.T) {
	t.Parallel()
	for name, length := range map[string]int64{"declared": int64(len(okBody)), "undeclared": -1} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{cfg: Config{MaxResponseBytes: 16}})
			var tb *trackedBody
			b.setExec("up", func(context.Context, provider.Call) (*http.Response, error) {
				var resp *http.Response
				resp, tb = answerWith("application/json", strings.NewReader(okBody))
				resp.ContentLength = length
				return resp, nil
			})
			c := b.chat(t)
			var out recordedAnswer
			err := b.svc.Serve(t.Context(), c, &out)
			if !errors.Is(err, ErrUpstream) || !strings.Contains(err.Error(), "limit of 16 bytes") {
				t.Fatalf("Serve: %v; want ErrUpstream naming the limit", err)
			}
			if out.head != nil || c.Usage.Outcome != "upstream_too_large" || tb.closed.Load() != 1 {
				t.Errorf("head %+v, outcome %q, body closed %d", out.head, c.Usage.Outcome, tb.closed.Load())
			}
			b.assertIdle(t)
		})
	}
}

// countingEngine counts renewals and releases.
type countingEngine struct {
	admission.Engine
	renews, releases atomic.Int32
}

func (e *countingEngine) Renew(ctx context.Context, id admission.LeaseID, owner admission.Owner) (time.Time, error) {
	e.renews.Add(1)
	return e.Engine.Renew(ctx, id, owner)
}

func (e *countingEngine) Release(ctx context.Context, id admission.LeaseID, owner admission.Owner) error {
	e.releases.Add(1)
	return e.Engine.Release(ctx, id, owner)
}

// TestLeaseRenewedWhileRunning: a lease that can expire is renewed for as
// long as its request runs, well past its TTL, so its slot is never
// handed on; once the request ends it is released exactly once and no
// longer renewed.
func TestLeaseRenewedWhileRunning(t *testing.T) {
	t.Parallel()
	ce := &countingEngine{}
	b := setup(t, setupOpts{
		engine: func(e admission.Engine) admission.Engine { ce.Engine = e; return ce },
		catalog: func(c *weir.Catalog) {
			onlyUp(c)
			c.PlatformModels[0].LeaseTTL = 3 * time.Second
		},
	})
	started, finish := b.holdExec("up")
	done := b.serveAsync(t.Context(), b.chat(t), &recordedAnswer{})
	<-started
	for range 10 {
		b.clock.Advance(time.Second)
	}
	if st := b.scope(t, weir.PlatformModelScope("up/m")); st.Leases != 1 {
		t.Fatalf("after 10s of a 3s TTL the running request holds %d leases", st.Leases)
	}
	if ce.renews.Load() < 3 {
		t.Errorf("renewed %d times in 10s of a 3s TTL", ce.renews.Load())
	}
	close(finish)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	renews := ce.renews.Load()
	b.clock.Advance(time.Minute)
	if ce.releases.Load() != 1 || ce.renews.Load() != renews {
		t.Errorf("released %d times, renewed %d times after the end", ce.releases.Load(), ce.renews.Load()-renews)
	}
	for {
		select {
		case e := <-b.events:
			if e.Outcome == admission.OutcomeExpired {
				t.Errorf("a lease expired: %+v", e)
			}
			continue
		default:
		}
		break
	}
	b.assertIdle(t)
}

// TestServeClientGoneWhileQueued: a client that leaves while its request
// waits leaves the queue, takes no slot, and is answered nothing.
func TestServeClientGoneWhileQueued(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: onlyUp})
	held := b.holdSlot(t)
	ctx, cancel := context.WithCancel(t.Context())
	c := b.chat(t)
	done := b.serveAsync(ctx, c, &recordedAnswer{})
	b.waitEvent(t, admission.OutcomeQueued)
	cancel()
	if err := <-done; !errors.Is(err, ErrClientGone) {
		t.Fatalf("Serve: %v; want ErrClientGone", err)
	}
	if c.Usage.Outcome != "cancelled" {
		t.Errorf("outcome %q", c.Usage.Outcome)
	}
	if st := b.scope(t, weir.PlatformModelScope("up/m")); st.Queued != 0 || st.Leases != 1 {
		t.Errorf("scope %+v; want only the holder's lease", st)
	}
	_ = b.engine.Release(t.Context(), held.ID, held.Owner)
}

// TestServeClientGoneDuringCall: a client that leaves while the upstream
// works ends the call without trying another candidate.
func TestServeClientGoneDuringCall(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	called := make(chan struct{})
	var n2 atomic.Int32
	b.setExec("up", func(ctx context.Context, _ provider.Call) (*http.Response, error) {
		close(called)
		<-ctx.Done()
		return nil, &provider.Error{Err: ctx.Err()}
	})
	b.setExec("up2", counted(&n2, okJSON(okBody)))
	ctx, cancel := context.WithCancel(t.Context())
	c := b.chat(t)
	done := b.serveAsync(ctx, c, &recordedAnswer{})
	<-called
	cancel()
	if err := <-done; !errors.Is(err, ErrClientGone) {
		t.Fatalf("Serve: %v; want ErrClientGone", err)
	}
	if c.Usage.Outcome != "cancelled" || n2.Load() != 0 {
		t.Errorf("outcome %q, next candidate called %d", c.Usage.Outcome, n2.Load())
	}
	b.assertIdle(t)
}

// failingAnswer fails its writes with err.
type failingAnswer struct {
	recordedAnswer
	err error
}

func (f *failingAnswer) Write([]byte) (int, error) { return 0, f.err }

// TestServeClientGoneDuringDelivery: a client that stops reading mid-answer
// ends the upstream call (its body closed, its lease released) and the
// outcome says how it went.
func TestServeClientGoneDuringDelivery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		stream  bool
		err     error
		outcome string
	}{
		{"stream, client left", true, errors.New("broken pipe"), "cancelled"},
		{"stream, write deadline", true, os.ErrDeadlineExceeded, "client_write_timeout"},
		{"json, client left", false, errors.New("broken pipe"), "cancelled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{})
			var tb *trackedBody
			b.setExec("up", func(context.Context, provider.Call) (*http.Response, error) {
				var resp *http.Response
				ct := "application/json"
				if tc.stream {
					ct = "text/event-stream"
				}
				resp, tb = answerWith(ct, &chunks{parts: []string{"data: {}\n\n", "data: [DONE]\n\n"}})
				return resp, nil
			})
			c := b.chat(t)
			c.Stream = tc.stream
			out := &failingAnswer{err: tc.err}
			if err := b.svc.Serve(t.Context(), c, out); err != nil {
				t.Fatalf("Serve after the answer started: %v", err)
			}
			if c.Usage.Outcome != tc.outcome || tb.closed.Load() != 1 || out.head == nil {
				t.Errorf("outcome %q (want %q), body closed %d, head %+v", c.Usage.Outcome, tc.outcome, tb.closed.Load(), out.head)
			}
			b.assertIdle(t)
		})
	}
}

// TestServeNonJSONPassedThrough: an answer that is not JSON (audio) is
// passed on as it arrives, with its length and headers.
func TestServeNonJSONPassedThrough(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: Config{MaxResponseBytes: 4}})
	b.setExec("up", func(context.Context, provider.Call) (*http.Response, error) {
		resp, _ := answerWith("audio/mpeg", &chunks{parts: []string{"ID3", "frames"}})
		resp.ContentLength = 9
		resp.Header.Set("Content-Disposition", "attachment")
		return resp, nil
	})
	c := b.chat(t)
	var out recordedAnswer
	if err := b.svc.Serve(t.Context(), c, &out); err != nil {
		t.Fatal(err)
	}
	if out.body.String() != "ID3frames" || out.head.ContentLength != 9 || out.head.ContentDisposition != "attachment" || c.Usage.Outcome != "ok" {
		t.Errorf("body %q, head %+v, outcome %q", out.body.String(), out.head, c.Usage.Outcome)
	}
}

// scriptedEngine answers TryAcquire with try and Acquire with acq.
type scriptedEngine struct {
	admission.Engine
	try, acq error
	mu       sync.Mutex
	acquired int
}

func (e *scriptedEngine) TryAcquire(context.Context, admission.Request) (admission.Lease, error) {
	return admission.Lease{}, e.try
}

func (e *scriptedEngine) Enqueue(_ context.Context, _ admission.Request, notify func(admission.Lease, error)) error {
	e.mu.Lock()
	e.acquired++
	e.mu.Unlock()
	notify(admission.Lease{}, e.acq)
	return nil
}

// TestServeAdmissionErrorCategories: every way admission can refuse a
// request maps to its category, with its parameter and Retry-After, and
// the outcome is the category's label.
func TestServeAdmissionErrorCategories(t *testing.T) {
	t.Parallel()
	wait := admission.ErrWouldWait
	for _, tc := range []struct {
		name       string
		try, acq   error
		maxTokens  int64
		askedBy    string
		want       error
		param      string
		retryAfter time.Duration
		msg        string
	}{
		{"queue full", wait, &admission.QueueFullError{Scope: weir.PlatformModelScope("up/m"), Limit: 3, RetryAfter: 2 * time.Second}, 0, "", ErrQueueFull, "", 2 * time.Second, "queue_limit 3"},
		{"queue full, bare", wait, admission.ErrQueueFull, 0, "", ErrQueueFull, "", time.Second, "is full"},
		{"max_wait", wait, &admission.TimeoutError{Scope: weir.GroupScope("default"), Value: time.Second, WaitingOn: weir.PlatformModelScope("up/m"), RetryAfter: 2 * time.Hour}, 0, "", ErrQueueTimeout, "", time.Minute, "max_wait (1s)"},
		{"own deadline", wait, &admission.TimeoutError{Value: time.Second, RetryAfter: 20 * time.Second}, 0, "X-Weir-Max-Wait", ErrQueueTimeout, "", 0, "the request's own max wait (X-Weir-Max-Wait"},
		{"max_wait, own wait set", wait, &admission.TimeoutError{Scope: weir.GroupScope("default"), Value: time.Second, RetryAfter: 20 * time.Second}, 0, "X-Weir-Max-Wait", ErrQueueTimeout, "", 0, "max_wait (1s)"},
		{"default deadline", wait, &admission.TimeoutError{Value: time.Second}, 0, "", ErrQueueTimeout, "", time.Second, "default_max_wait"},
		{"timeout, bare", wait, admission.ErrTimeout, 0, "", ErrQueueTimeout, "", time.Second, "waited"},
		{"token limit", &admission.TokenLimitError{Scope: weir.KeyScope("key_1"), TPM: 5, Tokens: 10}, nil, 100, "", ErrInvalid, "max_tokens", 0, "tpm 5"},
		{"token limit, no max_tokens", wait, &admission.TokenLimitError{Scope: weir.KeyScope("key_1"), TPM: 5, Tokens: 10}, 0, "", ErrInvalid, "", 0, "ask for fewer tokens"},
		{"no candidate", wait, admission.ErrNoCandidate, 0, "", ErrNoCandidate, "model", 0, "no platform can serve m"},
		{"unknown scope", admission.ErrUnknownScope, nil, 0, "", ErrNoCandidate, "model", 0, "no platform can serve m"},
		{"closed", wait, admission.ErrClosed, 0, "", ErrNoCandidate, "", 0, "shutting down"},
		{"rate limited past the deadline", &admission.RateLimitedError{RetryAfter: 2 * time.Minute}, nil, 0, "", ErrRateLimited, "", 2 * time.Minute, "rate limit"},
		{"rate limited past the own deadline", &admission.RateLimitedError{RetryAfter: 2 * time.Minute}, nil, 0, "X-Weir-Max-Wait", ErrRateLimited, "", 2 * time.Minute, "rate limit"},
		{"something else", wait, errors.New("disk on fire"), 0, "", ErrInternal, "", 0, "admission failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			se := &scriptedEngine{try: tc.try, acq: tc.acq}
			b := setup(t, setupOpts{engine: func(e admission.Engine) admission.Engine { se.Engine = e; return se }})
			c := b.chat(t)
			c.MaxTokens, c.MaxWaitAskedBy = tc.maxTokens, tc.askedBy
			err := b.svc.Serve(t.Context(), c, &recordedAnswer{})
			var ge *Error
			if !errors.As(err, &ge) || !errors.Is(err, tc.want) {
				t.Fatalf("Serve: %v; want %v", err, tc.want)
			}
			if ge.Param != tc.param || ge.RetryAfter != tc.retryAfter || !strings.Contains(ge.Message, tc.msg) {
				t.Errorf("param %q, Retry-After %s, message %q; want %q, %s, containing %q", ge.Param, ge.RetryAfter, ge.Message, tc.param, tc.retryAfter, tc.msg)
			}
			// A request that set its own max wait is told not to retry
			// what its wait brought; one that did not, as before.
			if ge.NoRetry != (tc.askedBy != "") {
				t.Errorf("NoRetry %v for a request whose max wait was asked by %q", ge.NoRetry, tc.askedBy)
			}
			if tc.acq != nil && !errors.Is(err, tc.acq) {
				t.Errorf("%v does not wrap the engine's %v", err, tc.acq)
			}
			if c.Usage.Outcome != tc.want.Error() {
				t.Errorf("outcome %q", c.Usage.Outcome)
			}
			if _, isRL := tc.try.(*admission.RateLimitedError); isRL && se.acquired != 0 {
				t.Errorf("waited for a rate window that opens past the deadline")
			}
		})
	}
}

// TestServeRealEngineRefusals: the real engine's refusals reach the
// client as their categories: a request bigger than a TPM limit can hold
// is the client's to change, and a closed engine is a gateway shutting
// down.
func TestServeRealEngineRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) {
		onlyUp(c)
		c.PlatformModels[0].TPM = 5
	}})
	c := b.chat(t)
	c.MaxTokens = 8
	if err := b.svc.Serve(t.Context(), c, &recordedAnswer{}); !errors.Is(err, ErrInvalid) || !errors.As(err, new(*admission.TokenLimitError)) {
		t.Errorf("over the TPM: %v; want ErrInvalid from a TokenLimitError", err)
	}
	b.engine.Close()
	c = b.chat(t)
	c.Tokens = 1
	if err := b.svc.Serve(t.Context(), c, &recordedAnswer{}); !errors.Is(err, ErrNoCandidate) || !errors.Is(err, admission.ErrClosed) {
		t.Errorf("closed engine: %v; want ErrNoCandidate from ErrClosed", err)
	}
}

// failingReconcile is an engine whose Reconcile fails.
type failingReconcile struct{ admission.Engine }

func (failingReconcile) Reconcile(context.Context, admission.LeaseID, admission.Owner, admission.Settlement) error {
	return errors.New("reconcile refused")
}

// TestReconcileFailureIsCounted: a failure settling a lease's tokens does
// not change the answer, and is counted.
func TestReconcileFailureIsCounted(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{engine: func(e admission.Engine) admission.Engine { return failingReconcile{e} }})
	b.setExec("up", okJSON(okBody))
	var out recordedAnswer
	if err := b.svc.Serve(t.Context(), b.chat(t), &out); err != nil || out.body.String() != okBody {
		t.Fatalf("Serve: %v, body %q", err, out.body.String())
	}
	if got := b.metrics.count("reconcile"); got != 1 {
		t.Errorf("reconcile failures counted %d, want 1", got)
	}
	b.assertIdle(t)
}

// failingRenew is an engine whose Renew fails with err.
type failingRenew struct {
	*countingEngine
	err error
}

func (f failingRenew) Renew(ctx context.Context, id admission.LeaseID, owner admission.Owner) (time.Time, error) {
	f.renews.Add(1)
	return time.Time{}, f.err
}

// TestLeaseRenewalFailures: a renewal the engine refuses because the
// lease is gone stops the renewing; another failure is tried again at
// the next turn. Either is logged, and the lease is still released once.
func TestLeaseRenewalFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want int32
	}{
		{"lease gone", admission.ErrLeaseNotHeld, 1},
		{"transient", errors.New("store busy"), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ce := &countingEngine{}
			b := setup(t, setupOpts{
				engine: func(e admission.Engine) admission.Engine { ce.Engine = e; return failingRenew{ce, tc.err} },
				catalog: func(c *weir.Catalog) {
					onlyUp(c)
					c.PlatformModels[0].LeaseTTL = 30 * time.Second
				},
			})
			started, finish := b.holdExec("up")
			done := b.serveAsync(t.Context(), b.chat(t), &recordedAnswer{})
			<-started
			for range 3 {
				b.clock.Advance(10 * time.Second)
			}
			close(finish)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if ce.renews.Load() != tc.want || ce.releases.Load() != 1 {
				t.Errorf("renewed %d times (want %d), released %d times", ce.renews.Load(), tc.want, ce.releases.Load())
			}
			if !strings.Contains(b.logs.String(), "could not renew") {
				t.Errorf("logs: %s", b.logs.String())
			}
		})
	}
}

// TestServeModelWithoutCandidates: a model the router offers nothing for
// has no candidate, and takes no lease.
func TestServeModelWithoutCandidates(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	c := b.chat(t)
	c.Model = weir.Model{Name: "bare", Kind: weir.KindChat}
	err := b.svc.Serve(t.Context(), c, &recordedAnswer{})
	var ge *Error
	if !errors.As(err, &ge) || !errors.Is(err, ErrNoCandidate) || ge.Param != "model" || c.Usage.Outcome != "no_candidate" {
		t.Fatalf("Serve: %v, outcome %q; want no_candidate", err, c.Usage.Outcome)
	}
	b.assertIdle(t)
}
