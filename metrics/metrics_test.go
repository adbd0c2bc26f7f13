package metrics

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

func TestObserveCountsOutcomes(t *testing.T) {
	m := New(nil)
	m.Observe(admission.Event{Outcome: admission.OutcomeAdmitted})
	m.Observe(admission.Event{Outcome: admission.OutcomeAdmitted})
	m.Observe(admission.Event{Outcome: admission.OutcomeTimeout})
	if got := testutil.ToFloat64(m.admission.WithLabelValues("admitted")); got != 2 {
		t.Fatalf("admitted = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.admission.WithLabelValues("timeout")); got != 1 {
		t.Fatalf("timeout = %v, want 1", got)
	}
	// Every outcome is there from the start, at zero.
	if got := testutil.ToFloat64(m.admission.WithLabelValues("queue_full")); got != 0 {
		t.Fatalf("queue_full = %v, want 0", got)
	}
}

// A shadow event counts once, by its scope and what the limit would have
// done; key scopes are summed.
func TestObserveCountsShadow(t *testing.T) {
	m := New(nil)
	for _, e := range []admission.Event{
		{Outcome: admission.OutcomeShadow, Scope: "pm:a/b", Would: admission.OutcomeQueued},
		{Outcome: admission.OutcomeShadow, Scope: "pm:a/b", Would: admission.OutcomeQueued},
		{Outcome: admission.OutcomeShadow, Scope: "key:k1", Would: admission.OutcomeRateLimited},
		{Outcome: admission.OutcomeShadow, Scope: "key:k2", Would: admission.OutcomeRateLimited},
		{Outcome: admission.OutcomeAdmitted},
	} {
		m.Observe(e)
	}
	want := `
# HELP weir_shadow_total Admissions through a scope whose limits are in shadow that the limits would have held back, by scope (key scopes summed as key:*) and what they would have done: queued (waited for capacity), rate_limited (waited for a rate limit), queue_full and no_candidate (refused: a full queue, more tokens than the tpm), timeout (dropped at max_wait).
# TYPE weir_shadow_total counter
weir_shadow_total{scope="key:*",would="rate_limited"} 2
weir_shadow_total{scope="pm:a/b",would="queued"} 2
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "weir_shadow_total"); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.admission.WithLabelValues("shadow")); got != 4 {
		t.Errorf("shadow admission events = %v, want 4", got)
	}
}

func TestScopeGaugesLeaveOutKeys(t *testing.T) {
	m := New(func(context.Context) []admission.ScopeStats {
		return []admission.ScopeStats{
			{Name: "pm:a/b", Used: 2, Queued: 5, Config: admission.ScopeConfig{Limit: 2}},
			{Name: "key:k1", Used: 1},
			{Name: "budget:bgt_k1", Used: 1},
		}
	})
	m.ObserveUpstream("a/b", "ok", time.Millisecond)
	want := `
# HELP weir_scope_in_flight Amount held in the scope now.
# TYPE weir_scope_in_flight gauge
weir_scope_in_flight{scope="pm:a/b",type="pm"} 2
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "weir_scope_in_flight"); err != nil {
		t.Fatal(err)
	}
}

// A model request's answer is counted with its status as a label
// without an allocation once its series exists, and every status is
// the number it was.
func TestObserveHTTPStatus(t *testing.T) {
	m := New(nil)
	m.ObserveHTTP("chat", 200, time.Millisecond)
	if n := testing.AllocsPerRun(100, func() { m.ObserveHTTP("chat", 200, time.Millisecond) }); n != 0 {
		t.Errorf("ObserveHTTP allocates %v a request", n)
	}
	for _, st := range []int{0, 99, 100, 200, 429, 499, 599, 600, 1000} {
		if got := statusLabel(st); got != strconv.Itoa(st) {
			t.Errorf("statusLabel(%d) = %q", st, got)
		}
	}
}

// A request's observations count in the series of their labels, through
// the cache of children and past its bound.
func TestObserveRequestSeries(t *testing.T) {
	m := New(nil)
	m.ObserveHTTP("chat", 200, time.Millisecond)
	m.ObserveHTTP("chat", 200, time.Millisecond)
	m.ObserveHTTP("chat", 429, time.Millisecond)
	m.ObserveHTTP("embeddings", 200, time.Millisecond)
	for _, c := range []struct {
		endpoint, code string
		want           float64
	}{{"chat", "200", 2}, {"chat", "429", 1}, {"embeddings", "200", 1}} {
		if got := testutil.ToFloat64(m.httpReqs.WithLabelValues(c.endpoint, c.code)); got != c.want {
			t.Errorf("weir_http_requests_total{%s,%s} = %v, want %v", c.endpoint, c.code, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.httpDur); n != 2 {
		t.Errorf("weir_http_request_duration_seconds has %d series, want 2", n)
	}
	for i := range maxChildren + 10 {
		pm := "pm-" + strconv.Itoa(i)
		m.ObserveUpstream(pm, "ok", time.Millisecond)
		m.ObserveUpstream(pm, "ok", time.Millisecond)
		if i%1000 == 0 || i >= maxChildren {
			if got := testutil.ToFloat64(m.upstream.WithLabelValues(pm, "ok")); got != 2 {
				t.Fatalf("weir_upstream_requests_total{%s,ok} = %v, want 2", pm, got)
			}
		}
	}
	if n := len(m.cached.upstream.m); n != maxChildren {
		t.Errorf("%d upstream children cached, want the bound %d", n, maxChildren)
	}
	if n := testutil.CollectAndCount(m.upstreamLt); n != maxChildren+10 {
		t.Errorf("weir_upstream_latency_seconds has %d series, want %d", n, maxChildren+10)
	}
	m.Affinity("m", "hit")
	m.Affinity("m", "hit")
	m.Affinity("m", "miss")
	m.Affinity("n", "hit")
	for _, c := range []struct {
		model, result string
		want          float64
	}{{"m", "hit", 2}, {"m", "miss", 1}, {"n", "hit", 1}} {
		if got := testutil.ToFloat64(m.affinity.WithLabelValues(c.model, c.result)); got != c.want {
			t.Errorf("weir_affinity_total{%s,%s} = %v, want %v", c.model, c.result, got, c.want)
		}
	}
	if n := len(m.cached.affinity.m); n != 3 {
		t.Errorf("%d affinity children cached, want 3", n)
	}
}

// A task's observations count in the series of their labels, through
// the caches of children, without an allocation once the series exist.
func TestObserveTaskSeries(t *testing.T) {
	m := New(nil)
	observe := func() {
		m.TaskTransition(weir.TaskRunning)
		m.TaskWaited("v", time.Second)
		m.TaskRan("v", weir.TaskSucceeded, 2*time.Second)
		m.TaskDispatch("deferred")
		m.TaskCandidateSkipped("paused")
		m.WebhookAttempt("delivered")
	}
	observe()
	if n := testing.AllocsPerRun(100, observe); n != 0 {
		t.Errorf("a task's observations allocate %v", n)
	}
	m.TaskRan("v", weir.TaskFailed, time.Second)
	m.TaskRan("w", weir.TaskSucceeded, time.Second)
	for _, c := range []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"weir_task_transitions_total{running}", m.tasks.WithLabelValues("running"), 102},
		{"weir_task_dispatch_total{deferred}", m.dispatch.WithLabelValues("deferred"), 102},
		{"weir_task_candidate_skipped_total{paused}", m.skipped.WithLabelValues("paused"), 102},
		{"weir_task_webhook_attempts_total{delivered}", m.webhooks.WithLabelValues("delivered"), 102},
	} {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.taskRun); n != 3 {
		t.Errorf("weir_task_run_seconds has %d series, want 3", n)
	}
	if n := testutil.CollectAndCount(m.taskWait); n != 1 {
		t.Errorf("weir_task_queue_wait_seconds has %d series, want 1", n)
	}
	if n := len(m.taskCached.taskRun.m); n != 3 {
		t.Errorf("%d task run children cached, want 3", n)
	}
}
