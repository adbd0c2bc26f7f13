package httpapi

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/internal/otlptest"
	"github.com/weir-gateway/weir/task"
)

const clientTraceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

// tracedSetup is setup with tracing on, exporting to a receiver.
func tracedSetup(t *testing.T, o setupOpts) (*testBundle, *otlptest.Receiver) {
	r := otlptest.New(t)
	tp := r.Provider(t)
	deps := o.deps
	o.deps = func(d *Deps) {
		d.Tracing = tp
		if deps != nil {
			deps(d)
		}
	}
	return setup(t, o), r
}

// A traced request's server span joins its client's trace; the queue
// span and the upstream's client span (with the GenAI attributes) are
// its children; the upstream receives the client span's traceparent.
func TestTraceOfAChatRequest(t *testing.T) {
	t.Parallel()
	logs := &accessLog{}
	b, rcv := tracedSetup(t, setupOpts{deps: func(d *Deps) { d.Logger = logs.logger() }})
	resp := b.post(t, "/v1/chat/completions", `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"a secret prompt"}]}`,
		http.Header{"Traceparent": {clientTraceparent}})
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	spans := rcv.Named(t, "POST /v1/chat/completions", "chat gpt-4o-mini")
	server := otlptest.Find(spans, "POST /v1/chat/completions")
	client := otlptest.Find(spans, "chat gpt-4o-mini")
	if server.TraceID != "0af7651916cd43dd8448eb211c80319c" || server.ParentSpanID != "b7ad6b7169203331" {
		t.Errorf("server span in trace %s under %s; want the client's traceparent's", server.TraceID, server.ParentSpanID)
	}
	if server.Kind != "SPAN_KIND_SERVER" || server.Attrs["http.response.status_code"] != int64(200) || server.Attrs["http.route"] != "POST /v1/chat/completions" ||
		server.Attrs["weir.outcome"] != "ok" || server.Attrs["weir.model"] != "m" || server.Attrs["weir.key_id"] == nil || server.Attrs["weir.platform_model"] != nil {
		t.Errorf("server span: %s %v", server.Kind, server.Attrs)
	}
	if client.TraceID != server.TraceID || client.ParentSpanID != server.SpanID {
		t.Errorf("client span is under %s/%s; want the server span %s", client.TraceID, client.ParentSpanID, server.SpanID)
	}
	// Admitted at once, it has no queue span (the server span ends
	// last: its children are in by now).
	if q := otlptest.Find(spans, "weir.queue"); q != nil {
		t.Errorf("a queue span for a request admitted at once: %v", q.Attrs)
	}
	want := map[string]any{
		"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini",
		"gen_ai.response.model": "gpt-4o-mini", "gen_ai.request.max_tokens": int64(50), "server.address": "127.0.0.1",
		"weir.platform_model": "up/m", "weir.platform": "up", "weir.attempt": int64(0),
	}
	for k, v := range want {
		if client.Attrs[k] != v {
			t.Errorf("client span %s = %v, want %v", k, client.Attrs[k], v)
		}
	}
	// What the server span says is not repeated on its child.
	if client.Attrs["weir.model"] != nil {
		t.Errorf("client span repeats weir.model: %v", client.Attrs)
	}
	if client.Kind != "SPAN_KIND_CLIENT" || client.Attrs["gen_ai.usage.input_tokens"] == nil || client.Attrs["gen_ai.usage.output_tokens"] == nil ||
		!containsAll(client.Attrs["gen_ai.response.finish_reasons"], "stop") {
		t.Errorf("client span: %s %v", client.Kind, client.Attrs)
	}
	for _, s := range spans {
		for k, v := range s.Attrs {
			if str, ok := v.(string); ok && strings.Contains(str, "secret prompt") {
				t.Errorf("span %s records the prompt in %s", s.Name, k)
			}
		}
	}
	if line := logs.waitRequests(t, 1)[0]; line["trace_id"] != server.TraceID {
		t.Errorf("the access log line names no trace id %s:\n%s", server.TraceID, logs.text())
	}
	traced := b.mock.Traced()
	if len(traced) != 1 || traced[0].Traceparent != "00-"+server.TraceID+"-"+client.SpanID+"-01" {
		t.Errorf("the upstream received %+v; want the client span's traceparent", traced)
	}
}

func containsAll(v any, want ...string) bool {
	got, _ := v.([]string)
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			return false
		}
	}
	return true
}

// A request that waits for a lease records where it stood, and how its
// wait ended, on its queue span.
func TestTraceOfAQueuedRequest(t *testing.T) {
	t.Parallel()
	gate, arrived := make(chan struct{}), make(chan struct{}, 4)
	queued := make(chan struct{}, 4)
	b, rcv := tracedSetup(t, setupOpts{
		cfg:    Config{DefaultMaxWait: time.Hour},
		limits: weir.Limits{Concurrency: 1},
		observer: admission.ObserverFunc(func(e admission.Event) {
			if e.Outcome == admission.OutcomeQueued {
				queued <- struct{}{}
			}
		}),
		upstream: gateUpstream(gate, arrived),
	})
	first := make(chan int, 1)
	go func() {
		resp, err := b.send(t, t.Context(), chatJSON)
		if err != nil {
			first <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-arrived
	second := make(chan int, 1)
	go func() {
		resp, err := b.send(t, t.Context(), chatJSON)
		if err != nil {
			second <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		second <- resp.StatusCode
	}()
	<-queued
	close(gate)
	if s1, s2 := <-first, <-second; s1 != http.StatusOK || s2 != http.StatusOK {
		t.Fatalf("statuses %d, %d", s1, s2)
	}
	spans := rcv.WaitFor(t, func(spans []otlptest.Span) bool {
		n := 0
		for _, s := range spans {
			if s.Name == "POST /v1/chat/completions" {
				n++
			}
		}
		return n == 2
	})
	var queues []otlptest.Span
	for _, s := range spans {
		if s.Name == "weir.queue" {
			queues = append(queues, s)
		}
	}
	if len(queues) != 1 {
		t.Fatalf("%d queue spans; want the waiter's alone", len(queues))
	}
	waited := queues[0]
	if waited.Attrs["weir.queue.position"] != int64(1) || waited.Attrs["weir.queue.scope"] != weir.PlatformModelScope("up/m") ||
		waited.Attrs["weir.queue.outcome"] != "admitted" || !containsAll(waited.Attrs["weir.queue.scopes"], weir.PlatformModelScope("up/m")) {
		t.Errorf("queue span of the waiter: %v", waited.Attrs)
	}
	var server *otlptest.Span
	for i := range spans {
		if spans[i].SpanID == waited.ParentSpanID {
			server = &spans[i]
		}
	}
	if server == nil || server.Name != "POST /v1/chat/completions" || server.TraceID != waited.TraceID {
		t.Errorf("the queue span's parent is %+v; want its request's server span", server)
	}
}

// A wait that runs out is a queue span with the outcome queue_timeout
// and an error status; the server span answers 503.
func TestTraceOfAQueueTimeout(t *testing.T) {
	t.Parallel()
	gate, arrived := make(chan struct{}), make(chan struct{}, 4)
	b, rcv := tracedSetup(t, setupOpts{
		limits:   weir.Limits{Concurrency: 1},
		upstream: gateUpstream(gate, arrived),
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := b.send(t, t.Context(), chatJSON); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	<-arrived
	resp := b.post(t, "/v1/chat/completions", chatJSON, http.Header{"X-Weir-Max-Wait": {"10ms"}})
	resp.Body.Close()
	close(gate)
	<-done
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", resp.StatusCode)
	}
	spans := rcv.WaitFor(t, func(spans []otlptest.Span) bool {
		for _, s := range spans {
			if s.Name == "weir.queue" && s.Attrs["weir.queue.outcome"] == "queue_timeout" {
				return true
			}
		}
		return false
	})
	for _, s := range spans {
		if s.Name == "weir.queue" && s.Attrs["weir.queue.outcome"] == "queue_timeout" && s.Status != "STATUS_CODE_ERROR" {
			t.Errorf("a timed-out wait's span has status %s", s.Status)
		}
	}
}

// Without a tracer provider nothing is traced, and a client's
// traceparent goes no further.
func TestNoTraceWithoutProvider(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	resp := b.post(t, "/v1/chat/completions", chatJSON, http.Header{"Traceparent": {clientTraceparent}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if got := b.mock.Traced(); len(got) != 0 {
		t.Errorf("the upstream received a trace context with tracing off: %+v", got)
	}
}

// A durable task submitted by a traced request is part of its trace:
// its wait and its job's attempt are spans below the request's server
// span, started from the trace context stored with the task, and the
// upstream's video API receives the attempt's trace context.
func TestTraceOfATask(t *testing.T) {
	t.Parallel()
	b, rcv := tracedSetup(t, setupOpts{tasks: &task.Config{}})
	v := callAs[videoObject](t, b, http.StatusOK, http.MethodPost, "/v1/videos", b.key, `{"model":"v","prompt":"a weir"}`,
		http.Header{"Traceparent": {clientTraceparent}})
	got := b.waitTask(t, v.ID, weir.TaskSucceeded)
	if !strings.HasPrefix(got.TraceParent, "00-0af7651916cd43dd8448eb211c80319c-") {
		t.Fatalf("the stored task's traceparent is %q; want the request's trace", got.TraceParent)
	}
	spans := rcv.Named(t, "POST /v1/videos", "weir.task.queued", "weir.task.attempt")
	server := otlptest.Find(spans, "POST /v1/videos")
	for _, name := range []string{"weir.task.queued", "weir.task.attempt"} {
		s := otlptest.Find(spans, name)
		if s.TraceID != server.TraceID || s.ParentSpanID != server.SpanID || s.Attrs["weir.task.id"] != v.ID {
			t.Errorf("%s in %s under %s (%v); want under the server span %s", name, s.TraceID, s.ParentSpanID, s.Attrs, server.SpanID)
		}
	}
	var submitted bool
	for _, tr := range b.mock.Traced() {
		if tr.Path == "/v1/videos" && strings.HasPrefix(tr.Traceparent, "00-"+server.TraceID+"-") {
			submitted = true
		}
	}
	if !submitted {
		t.Errorf("the upstream's video API received no traceparent of the task's trace: %+v", b.mock.Traced())
	}
}
