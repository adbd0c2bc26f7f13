package gateway

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/provider"
	"github.com/weir-gateway/weir/provider/mock"
)

// tooManyFor answers 429 with a Retry-After of d while *on, else okBody.
func tooManyFor(on *atomic.Bool, d time.Duration) execFunc {
	return func(context.Context, provider.Call) (*http.Response, error) {
		if on.Load() {
			return nil, &provider.Error{Status: http.StatusTooManyRequests, RetryAfter: d, Body: []byte(`{"error":{"type":"requests"}}`)}
		}
		resp, _ := answerWith("application/json", strings.NewReader(okBody))
		return resp, nil
	}
}

func okExec(context.Context, provider.Call) (*http.Response, error) {
	resp, _ := answerWith("application/json", strings.NewReader(okBody))
	return resp, nil
}

// TestRetryAfterPauses: a 429 with Retry-After: 3 pauses its platform
// model for 3 s: the request that got it, and those after, are served by
// the fallback, and nothing is sent to the paused one until the pause is
// over; then it serves again.
func TestRetryAfterPauses(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	var upCalls, up2Calls atomic.Int32
	var limited atomic.Bool
	limited.Store(true)
	b.setExec("up", counted(&upCalls, tooManyFor(&limited, 3*time.Second)))
	b.setExec("up2", counted(&up2Calls, okExec))

	c := b.chat(t)
	if err := b.svc.Serve(t.Context(), c, &recordedAnswer{}); err != nil || c.Usage.PlatformModel != "up2/m" {
		t.Fatalf("the request that met the 429: %v, served by %q; want up2/m", err, c.Usage.PlatformModel)
	}
	limited.Store(false) // it would answer now; it is not asked
	for range 5 {
		c := b.chat(t)
		if err := b.svc.Serve(t.Context(), c, &recordedAnswer{}); err != nil || c.Usage.PlatformModel != "up2/m" {
			t.Fatalf("during the pause: %v, served by %q; want up2/m", err, c.Usage.PlatformModel)
		}
	}
	if n := upCalls.Load(); n != 1 {
		t.Errorf("%d calls reached the paused platform model; want only the one that was refused", n)
	}
	if st := b.scope(t, weir.PlatformModelScope("up/m")); !st.Config.Paused {
		t.Error("up/m's scope is not paused")
	}
	if p := b.svc.Paused(); len(p) != 1 || !p["up/m"].Equal(stored(b.clock.Now().Add(3*time.Second))) {
		t.Errorf("Paused() = %v; want up/m until 3 s from now", p)
	}

	b.clock.Advance(3 * time.Second)
	c = b.chat(t)
	if err := b.svc.Serve(t.Context(), c, &recordedAnswer{}); err != nil || c.Usage.PlatformModel != "up/m" {
		t.Fatalf("after the pause: %v, served by %q; want up/m again", err, c.Usage.PlatformModel)
	}
	if st := b.scope(t, weir.PlatformModelScope("up/m")); st.Config.Paused {
		t.Error("up/m's scope is still paused")
	}
	b.metrics.mu.Lock()
	defer b.metrics.mu.Unlock()
	if want := []string{"up/m paused", "up/m resumed"}; !slices.Equal(b.metrics.paused, want) {
		t.Errorf("pause metrics %v; want %v", b.metrics.paused, want)
	}
}

// TestOverloadPauses: a passing overload (Anthropic's 529) pauses its
// platform model for its RetryAfter as a 429 does, and the request goes
// to the fallback.
func TestOverloadPauses(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	var upCalls atomic.Int32
	b.setExec("up", counted(&upCalls, func(context.Context, provider.Call) (*http.Response, error) {
		return nil, &provider.Error{Status: 529, Overloaded: true, RetryAfter: 2 * time.Second, Body: []byte(`{"error":{"type":"overloaded_error"}}`)}
	}))
	b.setExec("up2", okExec)
	for range 3 {
		c := b.chat(t)
		if err := b.svc.Serve(t.Context(), c, &recordedAnswer{}); err != nil || c.Usage.PlatformModel != "up2/m" {
			t.Fatalf("%v, served by %q; want up2/m", err, c.Usage.PlatformModel)
		}
	}
	if n := upCalls.Load(); n != 1 {
		t.Errorf("%d calls reached the overloaded platform model; want the one", n)
	}
	if p := b.svc.Paused(); !p["up/m"].Equal(stored(b.clock.Now().Add(2 * time.Second))) {
		t.Errorf("Paused() = %v; want up/m for 2 s", p)
	}
}

// TestRetryAfterWaits: with no other candidate, the request that met the
// 429 waits out the pause (it ends before its deadline) and is served by
// the same platform model, which nothing reached meanwhile.
func TestRetryAfterWaits(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: onlyUp})
	var calls atomic.Int32
	var limited atomic.Bool
	limited.Store(true)
	b.setExec("up", counted(&calls, tooManyFor(&limited, 3*time.Second)))
	c := b.chat(t)
	done := b.serveAsync(t.Context(), c, &recordedAnswer{})
	b.waitEvent(t, admission.OutcomeQueued)
	limited.Store(false)
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d calls before the pause ended; want 1", n)
	}
	b.clock.Advance(3 * time.Second)
	if err := <-done; err != nil || c.Usage.PlatformModel != "up/m" {
		t.Fatalf("after the pause: %v, served by %q", err, c.Usage.PlatformModel)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d calls; want the refused one and the one after the pause", n)
	}
}

// TestRetryAfterPastDeadline: a pause that outlasts a request's wait is
// answered 429 rate_limited with the Retry-After — at once for a request
// that arrives during it, without reaching the upstream — not a 502 or a
// queue timeout. (A pause ends on the microsecond the store keeps.)
func TestRetryAfterPastDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: onlyUp})
	var calls atomic.Int32
	var limited atomic.Bool
	limited.Store(true)
	b.setExec("up", counted(&calls, tooManyFor(&limited, 30*time.Second)))
	for i, what := range []string{"the request that met the 429", "a request during the pause"} {
		c := b.chat(t)
		c.Deadline = b.clock.Now().Add(10 * time.Second)
		err := b.svc.Serve(t.Context(), c, &recordedAnswer{})
		var e *Error
		if !errors.As(err, &e) || e.Category != ErrRateLimited || e.RetryAfter < 29*time.Second-time.Microsecond || e.RetryAfter > 30*time.Second {
			t.Fatalf("%s: %v; want rate_limited with the 30 s Retry-After", what, err)
		}
		if n := calls.Load(); n != 1 {
			t.Fatalf("after %s: %d upstream calls; want 1", what, n)
		}
		if i == 0 {
			b.clock.Advance(time.Second)
		}
	}
}

// TestRetryAfterBounded: an upstream's Retry-After pauses at most
// maxPause, and a later, longer one extends the pause.
func TestRetryAfterBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.svc.pauseUpstream(b.svc.deps.Logger, "up/m", time.Second)
	b.svc.pauseUpstream(b.svc.deps.Logger, "up/m", 24*time.Hour)
	b.svc.pauseUpstream(b.svc.deps.Logger, "up/m", time.Second) // shorter: no change
	if until, ok := b.svc.pausedUntil("up/m"); !ok || !until.Equal(stored(b.clock.Now().Add(maxPause))) {
		t.Fatalf("paused until %s (%v); want maxPause from now", until, ok)
	}
	b.clock.Advance(time.Second) // the first pause's end: it was extended
	if _, ok := b.svc.pausedUntil("up/m"); !ok {
		t.Fatal("the first pause's timer ended the extended pause")
	}
	b.clock.Advance(maxPause)
	if _, ok := b.svc.pausedUntil("up/m"); ok {
		t.Fatal("still paused after maxPause")
	}
}

// TestPauseOutlivesReload: a catalog reload during a pause keeps the
// platform model paused.
func TestPauseOutlivesReload(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.svc.pauseUpstream(b.svc.deps.Logger, "up/m", time.Minute)
	if err := b.svc.Apply(t.Context(), b.catalog(), ""); err != nil {
		t.Fatal(err)
	}
	if st := b.scope(t, weir.PlatformModelScope("up/m")); !st.Config.Paused {
		t.Error("a reload resumed a paused platform model")
	}
}

// TestPauseShown: /admin/queues' view of a paused platform model says so,
// and until when.
func TestPauseShown(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.svc.pauseUpstream(b.svc.deps.Logger, "up/m", time.Minute)
	want := stored(b.clock.Now().Add(time.Minute)).UTC().Format(time.RFC3339Nano)
	for _, v := range b.svc.Scopes(t.Context()) {
		switch v.Name {
		case weir.PlatformModelScope("up/m"):
			if !v.Paused || v.PausedUntil != want {
				t.Errorf("up/m's view: paused %v until %q; want until %q", v.Paused, v.PausedUntil, want)
			}
		case weir.PlatformModelScope("up2/m"):
			if v.Paused || v.PausedUntil != "" {
				t.Errorf("up2/m's view: paused %v until %q; want not paused", v.Paused, v.PausedUntil)
			}
		}
	}
}

// TestPauseHoldsAcrossReplicas: an upstream's pause met on one replica
// holds through another replica's reload, which learns of it there
// (reports it, and answers a request that cannot wait so long at once);
// it ends on every replica when it is over, and leaves nothing stored.
// Only the replica that met the 429 counts it.
func TestPauseHoldsAcrossReplicas(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: onlyUp})
	pm := weir.PlatformModelScope("up/m")
	var limited atomic.Bool
	limited.Store(true)
	b.setExec("up", tooManyFor(&limited, 30*time.Second))
	c := b.chat(t)
	c.Deadline = b.clock.Now().Add(time.Second)
	if err := b.svc.Serve(t.Context(), c, &recordedAnswer{}); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("the request that met the 429: %v; want rate_limited", err)
	}
	cat := b.catalog()
	onlyUp(&cat)
	otherMetrics := &countingMetrics{}
	other := New(Config{}, Deps{Engine: b.engine, Keys: b.store, Overrides: b.store, Clock: b.clock, Metrics: otherMetrics})
	if err := other.Apply(t.Context(), cat, ""); err != nil {
		t.Fatal(err)
	}
	if !b.scope(t, pm).Config.Paused {
		t.Fatal("another replica's reload undid the pause")
	}
	until := stored(b.clock.Now().Add(30 * time.Second))
	if v := view(t, other, pm); !v.Paused || v.PausedUntil != until.UTC().Format(time.RFC3339Nano) {
		t.Errorf("the other replica reports %+v; want paused until %s", v, until)
	}
	if got, ok := other.pausedUntil("up/m"); !ok || !got.Equal(until) {
		t.Errorf("the other replica holds the pause until %v, %v; want %v", got, ok, until)
	}
	c = b.chat(t)
	c.Snapshot, c.Deadline = other.Snapshot(), b.clock.Now().Add(time.Second)
	if err := other.Serve(t.Context(), c, &recordedAnswer{}); !errors.Is(err, ErrRateLimited) {
		t.Errorf("a request on the other replica that cannot wait out the pause: %v; want rate_limited at once", err)
	}
	b.clock.Advance(30 * time.Second)
	if b.scope(t, pm).Config.Paused {
		t.Error("still paused after the pause")
	}
	if p := other.Paused(); len(p) != 0 {
		t.Errorf("the other replica still holds %v", p)
	}
	if os, err := b.store.OverrideList(t.Context()); err != nil || len(os) != 0 {
		t.Errorf("stored after the pause: %+v, %v; want nothing", os, err)
	}
	otherMetrics.mu.Lock()
	defer otherMetrics.mu.Unlock()
	if slices.Contains(otherMetrics.paused, "up/m paused") {
		t.Errorf("the other replica counted a pause it did not meet: %v", otherMetrics.paused)
	}
}

// headerTransport adds header to every request it carries.
type headerTransport struct {
	header http.Header
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range h.header {
		r.Header[k] = vs
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestStreamFailurePauses: an upstream that reports an overload or a
// rate limit inside its stream, once its answer has begun, pauses its
// platform model for provider.OverloadPause, as a 529 or a 429 before the
// answer does: the client has the stream so far and the upstream's error
// (passed through as it came, or as the translated stream's error), and
// the next requests go to the fallback until the pause is over. So for
// a Messages stream passed to an anthropic platform, a Responses stream
// passed to an openai one, and a chat stream translated to Messages.
func TestStreamFailurePauses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		kind   string
		fail   string // X-Mock-Stream-Error
		native *Native
		// inStream is what the client's stream holds of the failure
		// (nothing: it came as the gateway's StreamError).
		inStream string
	}{
		{name: "messages passed through", kind: "anthropic", fail: "overloaded_error",
			native:   &Native{API: APIMessages, Path: "/messages", Body: rawBody(`{"model":"m","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)},
			inStream: "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\""},
		{name: "responses passed through", kind: "openai", fail: "rate_limit_exceeded",
			native:   &Native{API: APIResponses, Path: "/responses", Body: rawBody(`{"model":"m","input":"hi","stream":true}`)},
			inStream: `"code":"rate_limit_exceeded"`},
		{name: "chat translated to messages", kind: "anthropic", fail: "overloaded_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{mock: mock.Config{CompletionTokens: 8}, catalog: func(c *weir.Catalog) {
				c.Platforms[0].Kind = tc.kind // up/m: first in order
			}})
			failing, err := provider.New(provider.Platform{Kind: tc.kind, BaseURL: b.upstream,
				Client: &http.Client{Transport: headerTransport{http.Header{"X-Mock-Stream-Error": {tc.fail}}}}})
			if err != nil {
				t.Fatal(err)
			}
			var upCalls atomic.Int32
			b.setExec("up", counted(&upCalls, failing.Sync.Do))

			c := b.chat(t)
			c.Stream, c.Native = true, tc.native
			c.Body = rawBody(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
			var out recordedAnswer
			if err := b.svc.Serve(t.Context(), c, &out); err != nil || c.Usage.PlatformModel != "up/m" {
				t.Fatalf("serve: %v, served by %q; want up/m, its stream begun", err, c.Usage.PlatformModel)
			}
			if c.Usage.Outcome != string(OutcomeUpstreamBroken) {
				t.Errorf("outcome %q; want %q", c.Usage.Outcome, OutcomeUpstreamBroken)
			}
			body := out.body.String()
			if !strings.Contains(body, "delta") {
				t.Errorf("the stream before the failure was lost: %s", body)
			}
			if tc.inStream != "" {
				if !strings.Contains(body, tc.inStream) || out.streamE != nil {
					t.Errorf("stream %s, the gateway's error %v; want the upstream's failure as it came, and nothing added", body, out.streamE)
				}
			} else if out.streamE == nil {
				t.Errorf("the translated stream ended without an error: %s", body)
			}
			if p := b.svc.Paused(); !p["up/m"].Equal(stored(b.clock.Now().Add(provider.OverloadPause))) {
				t.Fatalf("Paused() = %v; want up/m for OverloadPause", p)
			}

			for range 2 {
				c := b.chat(t)
				if err := b.svc.Serve(t.Context(), c, &recordedAnswer{}); err != nil || c.Usage.PlatformModel != "up2/m" {
					t.Fatalf("during the pause: %v, served by %q; want up2/m", err, c.Usage.PlatformModel)
				}
			}
			if n := upCalls.Load(); n != 1 {
				t.Errorf("%d calls reached the paused platform model; want the one that failed", n)
			}
			b.clock.Advance(provider.OverloadPause)
			if _, ok := b.svc.pausedUntil("up/m"); ok {
				t.Error("still paused after OverloadPause")
			}
		})
	}
}

// TestRetryAfterKeepsPlace: a request refused by an upstream's pause
// waits it out where it first arrived: ahead of one that queued behind
// it while its call was out, which the upstream serves after it.
func TestRetryAfterKeepsPlace(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) { onlyUp(c); c.PlatformModels[0].Limits.Concurrency = 1 }})
	var (
		mu     sync.Mutex
		served []string // the requests' contents, in the order they reached the upstream after the 429
		first  atomic.Bool
	)
	calling, refuse := make(chan struct{}), make(chan struct{})
	b.setExec("up", func(ctx context.Context, call provider.Call) (*http.Response, error) {
		if first.CompareAndSwap(false, true) {
			close(calling)
			<-refuse
			return nil, &provider.Error{Status: http.StatusTooManyRequests, RetryAfter: 3 * time.Second, Body: []byte(`{"error":{"type":"requests"}}`)}
		}
		mu.Lock()
		served = append(served, map[bool]string{true: "A", false: "B"}[strings.Contains(string(call.Body), `"A"`)])
		mu.Unlock()
		return okExec(ctx, call)
	})
	request := func(id, content string) *Call {
		c := b.chat(t)
		c.RequestID = id
		c.Body = rawBody(`{"model":"m","messages":[{"role":"user","content":"` + content + `"}]}`)
		return c
	}
	doneA := b.serveAsync(t.Context(), request("req_A", "A"), &recordedAnswer{})
	<-calling
	doneB := b.serveAsync(t.Context(), request("req_B", "B"), &recordedAnswer{})
	b.waitEvent(t, admission.OutcomeQueued) // B, behind A's call
	close(refuse)
	b.waitEvent(t, admission.OutcomeQueued) // A again, for the pause
	b.clock.Advance(3 * time.Second)
	for _, done := range []<-chan error{doneA, doneB} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(served, []string{"A", "B"}) {
		t.Fatalf("after the pause the upstream served %v; want A, which arrived first, then B", served)
	}
}
