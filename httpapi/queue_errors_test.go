package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
)

// queueBundle is a setup bundle on a fake clock, with the engine's events
// and the usage records to wait on.
type queueBundle struct {
	*testBundle
	clk    *clock.Fake
	events chan admission.Event
	usage  chan weir.Usage
}

func setupQueue(t *testing.T, o setupOpts) *queueBundle {
	t.Helper()
	q := &queueBundle{
		clk:    clock.NewFake(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)),
		events: make(chan admission.Event, 1024),
		usage:  make(chan weir.Usage, 16),
	}
	o.clock = q.clk
	o.observer = admission.ObserverFunc(func(e admission.Event) {
		select { // the engine calls with its lock held: never block
		case q.events <- e:
		default:
			t.Errorf("event %v dropped: the test's buffer is full", e.Outcome)
		}
	})
	o.deps = func(d *Deps) { d.Usage = func(u weir.Usage) { q.usage <- u } }
	q.testBundle = setup(t, o)
	return q
}

// waitEvent waits for the engine's next event with outcome o, and for the
// engine to finish the step that made it: events come with its lock held,
// and the step arms its timer before letting the lock go, so a call that
// takes the lock waits for that.
func (q *queueBundle) waitEvent(t *testing.T, o admission.Outcome) admission.Event {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-q.events:
			if e.Outcome == o {
				q.engine.Scopes(t.Context())
				return e
			}
		case <-timeout:
			t.Fatalf("no %s event", o)
		}
	}
}

// hold takes one unit of scope at once.
func (q *queueBundle) hold(t *testing.T, id, scope string) admission.Lease {
	t.Helper()
	l, err := q.engine.TryAcquire(t.Context(), admission.Request{ID: id, Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: scope, Amount: 1}}}}})
	if err != nil {
		t.Fatalf("hold %s: %v", scope, err)
	}
	return l
}

func (q *queueBundle) release(t *testing.T, l admission.Lease) {
	t.Helper()
	if err := q.engine.Release(t.Context(), l.ID, l.Owner); err != nil {
		t.Fatalf("release %s: %v", l.WaiterID, err)
	}
}

// holdTimed leaves scope held (one unit) with a mean hold time of d: a
// waiter that queued is always timed, so one is queued, admitted and held
// for d first.
func (q *queueBundle) holdTimed(t *testing.T, scope string, d time.Duration) admission.Lease {
	t.Helper()
	l0 := q.hold(t, "hold-0", scope)
	got := make(chan admission.Lease, 1)
	err := q.engine.Enqueue(t.Context(), admission.Request{ID: "timed", Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: scope, Amount: 1}}}}},
		func(l admission.Lease, err error) {
			if err != nil {
				t.Errorf("timed waiter: %v", err)
			}
			got <- l
		})
	if err != nil {
		t.Fatal(err)
	}
	q.release(t, l0)
	l1 := <-got
	q.clk.Advance(d)
	q.release(t, l1)
	l := q.hold(t, "hold-1", scope)
	// Its events are the test's own, made before the calls returned.
	for len(q.events) > 0 {
		<-q.events
	}
	return l
}

type answer struct {
	resp *http.Response
	body []byte
	err  error
}

// postAsync sends a chat request for model m from its own goroutine.
func (q *queueBundle) postAsync(t *testing.T, body string, h http.Header) <-chan answer {
	t.Helper()
	ch := make(chan answer, 1)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, q.http.URL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+q.key)
	for k, vs := range h {
		req.Header[k] = vs
	}
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			ch <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		ch <- answer{resp: resp, body: b, err: err}
	}()
	return ch
}

func waitAnswer(t *testing.T, ch <-chan answer) answer {
	t.Helper()
	select {
	case a := <-ch:
		if a.err != nil {
			t.Fatal(a.err)
		}
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
		return answer{}
	}
}

// wantAPIError checks an answer's status, code, param, and that its
// message holds every one of msgs.
func wantAPIError(t *testing.T, a answer, status int, code, param string, msgs ...string) errorDetail {
	t.Helper()
	var eb errorBody
	if err := json.Unmarshal(a.body, &eb); err != nil {
		t.Fatalf("status %d, body %s: %v", a.resp.StatusCode, a.body, err)
	}
	e := eb.Error
	gotParam := ""
	if e.Param != nil {
		gotParam = *e.Param
	}
	if a.resp.StatusCode != status || e.Code != code || gotParam != param {
		t.Errorf("got %d %s (param %q): %s; want %d %s (param %q)", a.resp.StatusCode, e.Code, gotParam, e.Message, status, code, param)
	}
	for _, m := range msgs {
		if !strings.Contains(e.Message, m) {
			t.Errorf("message %q does not say %q", e.Message, m)
		}
	}
	return e
}

const chatBody = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`

// twoPlatformModels is a catalog whose model m prefers up/a to up/b.
func twoPlatformModels(a, b weir.Limits) *weir.Catalog {
	return &weir.Catalog{
		Platforms: []weir.Platform{{Name: "up", Kind: "openai", BaseURL: "UP"}},
		PlatformModels: []weir.PlatformModel{
			{Name: "up/a", Platform: "up", Upstream: "gpt-4o-mini", Limits: a},
			{Name: "up/b", Platform: "up", Upstream: "gpt-4o-mini", Limits: b},
		},
		Models: []weir.Model{{Name: "m", Kind: weir.KindChat, Candidates: []weir.Candidate{
			{PlatformModel: "up/a", Weight: 1, Priority: 1},
			{PlatformModel: "up/b", Weight: 1},
		}}},
	}
}

// A saturated primary's max_wait hands the request to its fallback: it
// is served there once the fallback has room, not failed with
// queue_timeout when the primary's max_wait passes.
func TestMaxWaitFallsBack(t *testing.T) {
	t.Parallel()
	q := setupQueue(t, setupOpts{catalog: twoPlatformModels(
		weir.Limits{Concurrency: 1, MaxWait: 2 * time.Second},
		weir.Limits{Concurrency: 1},
	)})
	q.hold(t, "hold-a", weir.PlatformModelScope("up/a"))
	lb := q.hold(t, "hold-b", weir.PlatformModelScope("up/b"))
	ch := q.postAsync(t, chatBody, nil)
	q.waitEvent(t, admission.OutcomeQueued)

	q.clk.Advance(2 * time.Second)
	q.waitEvent(t, admission.OutcomeReselected)
	select {
	case a := <-ch:
		t.Fatalf("answered when up/a's max_wait passed: %d %s", a.resp.StatusCode, a.body)
	default:
	}
	if st, err := q.engine.Scope(t.Context(), weir.PlatformModelScope("up/a")); err != nil || st.Queued != 0 {
		t.Errorf("up/a: %+v, %v; want nobody queued", st, err)
	}

	q.release(t, lb)
	a := waitAnswer(t, ch)
	if a.resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", a.resp.StatusCode, a.body)
	}
	if u := <-q.usage; u.PlatformModel != "up/b" || u.Waited != 2*time.Second {
		t.Errorf("usage %+v, want served by up/b after waiting 2s", u)
	}
}

// queue_timeout names the limit that fired and carries a Retry-After from
// the engine's wait estimate: one request queued in a scope whose leases
// are held 10s, one at a time. A request that set its own max wait
// (X-Weir-Max-Wait) said how long it waits, whichever limit fired: it
// gets the same 503 with no Retry-After and x-should-retry: false, so
// that an SDK does not retry it behind its caller's back.
func TestQueueTimeoutNamesLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		limits weir.Limits
		header http.Header
		wait   time.Duration
		msg    string
		// own: the request set its own max wait.
		own bool
	}{
		{"MaxWait", weir.Limits{Concurrency: 1, MaxWait: 2 * time.Second}, nil, 2 * time.Second,
			"waited 2s for capacity on model m: platform model up/m's max_wait (2s) passed", false},
		{"Header", weir.Limits{Concurrency: 1}, http.Header{HeaderMaxWait: {"300ms"}}, 300 * time.Millisecond,
			"waited 300ms for capacity on model m, queued on platform model up/m: the request's own max wait (X-Weir-Max-Wait 300ms) passed", true},
		{"MaxWaitUnderHeader", weir.Limits{Concurrency: 1, MaxWait: 2 * time.Second}, http.Header{HeaderMaxWait: {"5s"}}, 2 * time.Second,
			"waited 2s for capacity on model m: platform model up/m's max_wait (2s) passed", true},
		{"Default", weir.Limits{Concurrency: 1}, nil, 30 * time.Second,
			"waited 30s for capacity on model m, queued on platform model up/m: the gateway's default max wait (default_max_wait 30s) passed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := setupQueue(t, setupOpts{limits: tc.limits})
			q.holdTimed(t, weir.PlatformModelScope("up/m"), 10*time.Second)
			ch := q.postAsync(t, chatBody, tc.header)
			q.waitEvent(t, admission.OutcomeQueued)
			q.clk.Advance(tc.wait - time.Millisecond)
			select {
			case a := <-ch:
				t.Fatalf("answered early: %d %s", a.resp.StatusCode, a.body)
			default:
			}
			q.clk.Advance(time.Millisecond)
			a := waitAnswer(t, ch)
			wantAPIError(t, a, http.StatusServiceUnavailable, "queue_timeout", "", tc.msg)
			ra, retry := a.resp.Header.Get("Retry-After"), a.resp.Header.Values("X-Should-Retry")
			switch {
			case tc.own && (ra != "" || len(retry) != 1 || retry[0] != "false"):
				t.Errorf("Retry-After %q, x-should-retry %q; want none and false for a request that set its own max wait", ra, retry)
			case !tc.own && (ra != "10" || len(retry) != 0):
				t.Errorf("Retry-After %q, x-should-retry %q; want 10 (one queued, leases held 10s) and none", ra, retry)
			}
		})
	}
}

func TestQueueFullNamesLimit(t *testing.T) {
	t.Parallel()
	q := setupQueue(t, setupOpts{limits: weir.Limits{Concurrency: 1, QueueLimit: 1}})
	pm := weir.PlatformModelScope("up/m")
	q.holdTimed(t, pm, 10*time.Second)
	err := q.engine.Enqueue(t.Context(), admission.Request{ID: "queued", Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: pm, Amount: 1}}}}},
		func(admission.Lease, error) {})
	if err != nil {
		t.Fatal(err)
	}
	a := waitAnswer(t, q.postAsync(t, chatBody, nil))
	wantAPIError(t, a, http.StatusTooManyRequests, "queue_full", "", "the queue of platform model up/m is full (queue_limit 1)")
	if ra := a.resp.Header.Get("Retry-After"); ra != "10" {
		t.Errorf("Retry-After %q, want 10 (a lease is held 10s)", ra)
	}
}

// A request whose tokens a TPM bucket can never hold is refused at once
// with a 400 naming max_tokens and the limit, not left to a 429 that no
// retry can cure; a fallback without that limit serves it.
func TestTokensOverTPM(t *testing.T) {
	t.Parallel()
	body := `{"model":"m","max_tokens":5000,"messages":[{"role":"user","content":"hi"}]}`
	t.Run("NoFallback", func(t *testing.T) {
		t.Parallel()
		q := setupQueue(t, setupOpts{limits: weir.Limits{TPM: 1000}})
		a := waitAnswer(t, q.postAsync(t, body, nil))
		wantAPIError(t, a, http.StatusBadRequest, "invalid_request", "max_tokens",
			"more than platform model up/m allows in a minute (tpm 1000)")
		if ra := a.resp.Header.Get("Retry-After"); ra != "" {
			t.Errorf("Retry-After %q on a request no wait can serve", ra)
		}
		if n := q.mock.Stats().Requests; n != 0 {
			t.Errorf("the upstream saw %d requests", n)
		}
	})
	t.Run("Fallback", func(t *testing.T) {
		t.Parallel()
		q := setupQueue(t, setupOpts{catalog: twoPlatformModels(weir.Limits{TPM: 1000}, weir.Limits{})})
		a := waitAnswer(t, q.postAsync(t, body, nil))
		if a.resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", a.resp.StatusCode, a.body)
		}
		if u := <-q.usage; u.PlatformModel != "up/b" {
			t.Errorf("served by %s, want up/b", u.PlatformModel)
		}
	})
}

// TestNoDefaultMaxWait: with no default max wait (default_max_wait: 0 in
// the config, negative here) a queued request has no deadline of the
// gateway's, while one that asks for a max wait still gets it.
func TestNoDefaultMaxWait(t *testing.T) {
	t.Parallel()
	q := setupQueue(t, setupOpts{cfg: Config{DefaultMaxWait: -1}, limits: weir.Limits{Concurrency: 1}})
	q.holdTimed(t, weir.PlatformModelScope("up/m"), 10*time.Second)
	unbounded := q.postAsync(t, chatBody, nil)
	q.waitEvent(t, admission.OutcomeQueued)
	q.clk.Advance(time.Hour)
	asked := q.postAsync(t, chatBody, http.Header{HeaderMaxWait: {"2s"}})
	q.waitEvent(t, admission.OutcomeQueued)
	q.clk.Advance(2 * time.Second)
	wantAPIError(t, waitAnswer(t, asked), http.StatusServiceUnavailable, "queue_timeout", "",
		"the request's own max wait (X-Weir-Max-Wait 2s) passed")
	select {
	case a := <-unbounded:
		t.Fatalf("a request with no max wait was answered after an hour: %d %s", a.resp.StatusCode, a.body)
	default:
	}
}
