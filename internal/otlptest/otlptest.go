// Package otlptest is an in-process OTLP trace receiver for tests: a
// real OTLP/HTTP endpoint (and, with NewGRPC, an OTLP/gRPC one) that
// decodes the ExportTraceServiceRequests it is sent with the
// OpenTelemetry protobuf types and keeps their spans, so that a test can
// assert what a process exported over the wire.
package otlptest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one span received, decoded for assertions.
type Span struct {
	Name string
	// TraceID, SpanID and ParentSpanID are hex; ParentSpanID is "" for
	// a root.
	TraceID, SpanID, ParentSpanID string
	// Kind is the OTLP span kind's name: "SPAN_KIND_SERVER", ….
	Kind string
	// Attrs are the span's attributes: string, int64, float64, bool or
	// []string.
	Attrs map[string]any
	// Resource are the attributes of the resource it came from.
	Resource map[string]any
	// Links are the span contexts it links to, as "traceid/spanid".
	Links  []string
	Status string
	Events []string
	Start  time.Time
	End    time.Time
}

// Receiver keeps the spans exported to it.
type Receiver struct {
	// URL is the OTLP/HTTP endpoint's base (http://127.0.0.1:port):
	// spans are posted to URL+"/v1/traces".
	URL string
	// GRPCAddr is the OTLP/gRPC endpoint (host:port), "" unless made by
	// NewGRPC.
	GRPCAddr string

	mu      sync.Mutex
	spans   []Span
	changed chan struct{} // closed and replaced on every export
}

// New starts an OTLP/HTTP receiver, closed when t ends.
func New(t testing.TB) *Receiver {
	r := &Receiver{changed: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(r.serveHTTP))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// NewGRPC starts a receiver that takes OTLP over gRPC as well as over
// HTTP, closed when t ends.
func NewGRPC(t testing.TB) *Receiver {
	r := New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	collectorpb.RegisterTraceServiceServer(gs, grpcService{r: r})
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	r.GRPCAddr = ln.Addr().String()
	return r
}

// Provider is a tracer provider that exports to r over OTLP/HTTP as
// each span ends (no batching), sampling every span; shut down when t
// ends.
func (r *Receiver) Provider(t testing.TB) *sdktrace.TracerProvider {
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(r.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.NotFound(w, req)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg collectorpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&msg)
	out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

type grpcService struct {
	collectorpb.UnimplementedTraceServiceServer
	r *Receiver
}

func (g grpcService) Export(_ context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	g.r.add(req)
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

func (r *Receiver) add(msg *collectorpb.ExportTraceServiceRequest) {
	var got []Span
	for _, rs := range msg.GetResourceSpans() {
		res := attrMap(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{
					Name:     s.GetName(),
					TraceID:  hex.EncodeToString(s.GetTraceId()),
					SpanID:   hex.EncodeToString(s.GetSpanId()),
					Kind:     s.GetKind().String(),
					Attrs:    attrMap(s.GetAttributes()),
					Resource: res,
					Status:   s.GetStatus().GetCode().String(),
					Start:    time.Unix(0, int64(s.GetStartTimeUnixNano())),
					End:      time.Unix(0, int64(s.GetEndTimeUnixNano())),
				}
				if p := s.GetParentSpanId(); len(p) > 0 {
					sp.ParentSpanID = hex.EncodeToString(p)
				}
				for _, l := range s.GetLinks() {
					sp.Links = append(sp.Links, hex.EncodeToString(l.GetTraceId())+"/"+hex.EncodeToString(l.GetSpanId()))
				}
				for _, e := range s.GetEvents() {
					sp.Events = append(sp.Events, e.GetName())
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

func attrMap(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_ArrayValue:
		var out []string
		for _, e := range x.ArrayValue.GetValues() {
			if s, ok := e.GetValue().(*commonpb.AnyValue_StringValue); ok {
				out = append(out, s.StringValue)
			}
		}
		return out
	}
	return nil
}

// Spans are the spans received so far, in the order they came.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// WaitFor waits until ok holds of the spans received, and returns them;
// it fails t if that has not happened within 10 seconds (a bound on a
// broken test, not a wait for the spans: it returns as soon as they are
// in).
func (r *Receiver) WaitFor(t testing.TB, ok func([]Span) bool) []Span {
	t.Helper()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		r.mu.Lock()
		spans, changed := append([]Span(nil), r.spans...), r.changed
		r.mu.Unlock()
		if ok(spans) {
			return spans
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("otlptest: spans not received in time; have %d: %v", len(spans), names(spans))
			return nil
		}
	}
}

// Named waits until spans named each of names are in, and returns the
// spans received.
func (r *Receiver) Named(t testing.TB, names ...string) []Span {
	t.Helper()
	return r.WaitFor(t, func(spans []Span) bool {
		for _, n := range names {
			if Find(spans, n) == nil {
				return false
			}
		}
		return true
	})
}

// Find is the first of spans named name, or nil.
func Find(spans []Span, name string) *Span {
	for i := range spans {
		if spans[i].Name == name {
			return &spans[i]
		}
	}
	return nil
}

func names(spans []Span) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name
	}
	return out
}
