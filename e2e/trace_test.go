package e2e

// Traces across processes: `weir serve` and `weir node`, each exporting
// by OTLP/HTTP to a receiver in the test, join one trace.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir/internal/otlptest"
	"github.com/weir-gateway/weir/provider/mock"
)

// TestTraceThroughAnEdgeNode: a traced request served by an edge node
// is one trace: the gateway's server span, its upstream client span,
// and below that the node's span of the run; the runtime receives the
// node's span as its parent.
func TestTraceThroughAnEdgeNode(t *testing.T) {
	t.Parallel()
	rcv := otlptest.New(t)
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL, "OTEL_BSP_SCHEDULE_DELAY=50"}
	rt := startUpstream(t, mock.Config{})
	g := startGatewayEnv(t, env, "", nodeCatalog())
	_, key := g.createKey(t, "--name", "edge")
	n := newNodeEnv(t, g, env, "gpu-trace", rt.URL, 1)
	g.serving(t, n.id, 0)

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	rep := g.do(t, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("local"),
		Header: map[string]string{"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"}})
	if rep.Status != http.StatusOK {
		t.Fatalf("status %d: %s", rep.Status, rep.Body)
	}
	spans := rcv.Named(t, "POST /v1/chat/completions", "chat gpt-4o-mini", "weir.node.run")
	server := otlptest.Find(spans, "POST /v1/chat/completions")
	client := otlptest.Find(spans, "chat gpt-4o-mini")
	run := otlptest.Find(spans, "weir.node.run")
	if server.TraceID != traceID || server.ParentSpanID != "00f067aa0ba902b7" {
		t.Errorf("server span %s under %s; want the client's trace", server.TraceID, server.ParentSpanID)
	}
	if client.ParentSpanID != server.SpanID || client.Attrs["gen_ai.provider.name"] != "weir.node" {
		t.Errorf("client span under %s (server %s), attributes %v", client.ParentSpanID, server.SpanID, client.Attrs)
	}
	if run.TraceID != traceID || run.ParentSpanID != client.SpanID || run.Resource["service.name"] != "weir-node" {
		t.Errorf("node span in %s under %s from %v; want under the client span %s, from weir-node", run.TraceID, run.ParentSpanID, run.Resource["service.name"], client.SpanID)
	}
	if server.Resource["service.name"] != "weir" {
		t.Errorf("the gateway's service.name is %v", server.Resource["service.name"])
	}
	traced := rt.Mock.Traced()
	if len(traced) != 1 || !strings.HasPrefix(traced[0].Traceparent, "00-"+traceID+"-"+run.SpanID) {
		t.Errorf("the runtime received %+v; want the node span's traceparent", traced)
	}
}

// TestTraceOfATaskAcrossARestart: a task submitted by a traced request
// stays in its trace when the gateway is killed mid-task and a new
// process finishes it: the new process's job attempts and its callback
// delivery are spans below the submitting request's server span, and the
// callback receiver gets that trace's traceparent.
func TestTraceOfATaskAcrossARestart(t *testing.T) {
	t.Parallel()
	rcv := otlptest.New(t)
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL, "OTEL_BSP_SCHEDULE_DELAY=50"}
	up := startVideoUpstream(t, mock.Config{JobDuration: 2 * time.Second})
	secret, signer := newSecret(t)
	hooks := startReceiver(t, signer, nil)
	g := startGatewayEnv(t, env, "", videoCatalog(up.URL, taskOptions{Workers: 2, Concurrency: 2, Secret: secret, Loopback: true}))
	_, key := g.createKey(t)

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	rep := g.do(t, request{Path: "/v1/tasks", Key: key, Body: taskBody("traced", hooks.URL),
		Header: map[string]string{"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"}})
	var o taskObject
	if err := json.Unmarshal(rep.Body, &o); err != nil || o.ID == "" {
		t.Fatalf("POST /v1/tasks: %d %s", rep.Status, rep.Body)
	}
	waitFor(t, 10*time.Second, "the task's job to start upstream", func() bool { return len(up.Mock.Jobs()) == 1 })
	submit := rcv.Named(t, "POST /v1/tasks")
	server := otlptest.Find(submit, "POST /v1/tasks")
	g.kill9(t)
	killed := time.Now()

	g, _ = g.restart(t)
	if final := g.waitTerminal(t, key, []string{o.ID}, 60*time.Second); final[o.ID].Status != "succeeded" {
		t.Fatalf("task ended %+v", final[o.ID])
	}
	spans := rcv.WaitFor(t, func(spans []otlptest.Span) bool {
		var after, callback bool
		for _, s := range spans {
			after = after || s.Name == "weir.task.attempt" && s.Start.After(killed)
			callback = callback || s.Name == "weir.task.callback"
		}
		return after && callback
	})
	for _, s := range spans {
		if !strings.HasPrefix(s.Name, "weir.task.") {
			continue
		}
		if s.TraceID != traceID || s.ParentSpanID != server.SpanID || s.Attrs["weir.task.id"] != o.ID {
			t.Errorf("%s in trace %s under %s (%v); want under the submitting request's server span %s", s.Name, s.TraceID, s.ParentSpanID, s.Attrs, server.SpanID)
		}
	}
	var traced bool
	for _, d := range hooks.byTask()[o.ID] {
		traced = traced || strings.HasPrefix(d.Header.Get("Traceparent"), "00-"+traceID+"-")
	}
	if !traced {
		t.Error("the callback receiver got no traceparent of the task's trace")
	}
}

// TestTraceAcrossReplicas: a traced request that one replica of a fleet
// relays to the replica its edge node dialed is one trace: the first
// replica's server and client spans, the second replica's server span of
// the relay below that client span, and the node's run below the second
// replica's span.
func TestTraceAcrossReplicas(t *testing.T) {
	t.Parallel()
	rcv := otlptest.New(t)
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL, "OTEL_BSP_SCHEDULE_DELAY=50"}
	rt := startUpstream(t, mock.Config{})
	f := startFleetEnv(t, 2, env, "", nodeCatalog(), fleetTimings{fleetTermTTL, fleetHeartbeat})
	f.ready(t, "r0", "r1")
	r0, r1 := f.rs["r0"], f.rs["r1"]
	_, key := r0.createKey(t, "--name", "edge")
	n := newNodeEnv(t, r0, env, "gpu-trace", rt.URL, 1)
	r0.serving(t, n.id, 0)
	waitFor(t, 10*time.Second, "r1 to serve the node's model", func() bool {
		return r1.do(t, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("local")}).Status == http.StatusOK
	})

	const traceID = "5bf92f3577b34da6a3ce929d0e0e4737"
	rep := r1.do(t, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("local"),
		Header: map[string]string{"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"}})
	if rep.Status != http.StatusOK {
		t.Fatalf("status %d: %s", rep.Status, rep.Body)
	}
	// The processes export on their own schedules: wait until the chain
	// from the node's run up to the client's span has arrived whole.
	var trace, chain []otlptest.Span
	rcv.WaitFor(t, func(spans []otlptest.Span) bool {
		trace, chain = trace[:0], chain[:0]
		byID := make(map[string]otlptest.Span)
		for _, s := range spans {
			if s.TraceID == traceID {
				trace = append(trace, s)
				byID[s.SpanID] = s
			}
		}
		run := otlptest.Find(trace, "weir.node.run")
		if run == nil {
			return false
		}
		for s, ok := *run, true; ok; s, ok = byID[s.ParentSpanID] {
			chain = append(chain, s)
			if s.ParentSpanID == "00f067aa0ba902b7" {
				return true
			}
		}
		return false
	})
	var names []string
	for _, s := range chain {
		names = append(names, fmt.Sprintf("%s (%s, %v)", s.Name, s.Kind, s.Resource["service.name"]))
	}
	if root := chain[len(chain)-1]; root.Kind != "SPAN_KIND_SERVER" || root.Name != "POST /v1/chat/completions" {
		t.Errorf("the trace's root in Weir is %s (%s); want r1's server span", root.Name, root.Kind)
	}
	var relayed, relayServer bool
	for _, s := range trace {
		if s.Kind == "SPAN_KIND_CLIENT" && s.Attrs["weir.relay.replica"] != nil {
			relayed = true
			for _, c := range trace {
				relayServer = relayServer || c.ParentSpanID == s.SpanID && c.Kind == "SPAN_KIND_SERVER"
			}
		}
	}
	if !relayed || !relayServer {
		t.Errorf("want r1's client span naming the relay (weir.relay.replica) with r0's server span below it; the run's ancestry: %v", names)
	}
	if len(chain) != 4 || chain[1].Kind != "SPAN_KIND_SERVER" || chain[2].Kind != "SPAN_KIND_CLIENT" {
		t.Errorf("the run's ancestry %v; want r0's relay server span, r1's client span, r1's server span", names)
	}
}
