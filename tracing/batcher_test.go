package tracing

import (
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/weir-gateway/weir/clock"
)

// recordingExporter keeps the batches it is asked to export, and tells
// of each on exported.
type recordingExporter struct {
	mu       sync.Mutex
	batches  [][]string // the names of each batch's spans
	err      error      // what each export returns
	exported chan int   // each batch's size, if not nil
	shutdown bool
}

func (e *recordingExporter) exportBatch(_ context.Context, b *spanBatch) error {
	names := make([]string, b.len())
	for i := range names {
		names[i] = spanName(b.span(i))
	}
	e.mu.Lock()
	e.batches = append(e.batches, names)
	err := e.err
	e.mu.Unlock()
	if e.exported != nil {
		e.exported <- len(names)
	}
	return err
}

// spanName is the name of the span that field (a ScopeSpans.spans, as
// a spanBatch holds it) encodes; "" if it is not one.
func spanName(field []byte) string {
	num, typ, n := protowire.ConsumeTag(field)
	if n < 0 || num != fieldScopeSpans || typ != protowire.BytesType {
		return ""
	}
	msg, m := protowire.ConsumeBytes(field[n:])
	var span tracepb.Span
	if m < 0 || n+m != len(field) || proto.Unmarshal(msg, &span) != nil {
		return ""
	}
	return span.GetName()
}

func (e *recordingExporter) Shutdown(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.shutdown = true
	return nil
}

func (e *recordingExporter) got() [][]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([][]string(nil), e.batches...)
}

// batcherSetup is a batcher on a fake clock exporting to a
// recordingExporter, and a tracer whose spans it batches.
type batcherSetup struct {
	clk    *clock.Fake
	exp    *recordingExporter
	b      *batcher
	tracer trace.Tracer
}

func setupBatcher(t *testing.T, opts batchOptions, sampler sdktrace.Sampler) batcherSetup {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	exp := &recordingExporter{exported: make(chan int, 64)}
	b := newBatcher(exp, clk, opts)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b), sdktrace.WithSampler(sampler))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return batcherSetup{clk: clk, exp: exp, b: b, tracer: tp.Tracer(Scope)}
}

// end starts and ends n spans named name-0, name-1...
func (s batcherSetup) end(name string, n int) {
	for i := range n {
		_, span := s.tracer.Start(context.Background(), name+"-"+string(rune('0'+i)))
		span.End()
	}
}

// next waits for the next export and returns its size.
func (s batcherSetup) next(t *testing.T) int {
	t.Helper()
	select {
	case n := <-s.exp.exported:
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("no export")
		return 0
	}
}

func TestBatcherExportsAFullBatchAtOnce(t *testing.T) {
	s := setupBatcher(t, batchOptions{delay: time.Hour, maxQueue: 8, maxBatch: 3}, sdktrace.AlwaysSample())
	s.end("a", 2)
	if got := len(s.exp.got()); got != 0 {
		t.Fatalf("%d exports before a batch was full", got)
	}
	s.end("b", 1)
	if n := s.next(t); n != 3 {
		t.Fatalf("exported %d spans, want the batch of 3", n)
	}
	if got := s.exp.got(); strings.Join(got[0], ",") != "a-0,a-1,b-0" {
		t.Fatalf("exported %v, want the spans in the order they ended", got)
	}
	if s.clk.Pending() != 0 {
		t.Fatalf("%d timers with nothing waiting", s.clk.Pending())
	}
}

func TestBatcherExportsWhatWaitsAfterTheDelay(t *testing.T) {
	s := setupBatcher(t, batchOptions{delay: 5 * time.Second, maxQueue: 8, maxBatch: 4}, sdktrace.AlwaysSample())
	if s.clk.Pending() != 0 {
		t.Fatalf("an idle batcher has %d timers", s.clk.Pending())
	}
	s.end("a", 1)
	s.clk.Advance(4 * time.Second)
	s.end("b", 1) // the delay runs from the oldest span waiting
	select {
	case n := <-s.exp.exported:
		t.Fatalf("exported %d spans before the delay", n)
	default:
	}
	s.clk.Advance(time.Second)
	if n := s.next(t); n != 2 {
		t.Fatalf("exported %d spans, want both waiting", n)
	}
	if s.clk.Pending() != 0 {
		t.Fatalf("%d timers left after an export emptied the queue", s.clk.Pending())
	}
}

// handledErrors has OpenTelemetry's error handler keep what it is given
// until t ends, and returns what it has been given so far.
func handledErrors(t *testing.T) func() []error {
	var mu sync.Mutex
	var handled []error
	prev := otel.GetErrorHandler()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { mu.Lock(); handled = append(handled, err); mu.Unlock() }))
	t.Cleanup(func() { otel.SetErrorHandler(prev) })
	return func() []error {
		mu.Lock()
		defer mu.Unlock()
		return append([]error(nil), handled...)
	}
}

func TestBatcherDropsPastTheQueue(t *testing.T) {
	errs := handledErrors(t)

	s := setupBatcher(t, batchOptions{delay: time.Hour, maxQueue: 3, maxBatch: 3}, sdktrace.AlwaysSample())
	s.exp.mu.Lock() // the first export waits: the queue fills behind it
	s.end("a", 3)
	s.end("b", 5)
	s.exp.mu.Unlock()
	if n := s.next(t); n != 3 {
		t.Fatalf("first export %d spans", n)
	}
	if err := s.b.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var exported int
	for _, b := range s.exp.got() {
		exported += len(b)
	}
	if exported >= 8 {
		t.Fatalf("exported %d of 8 spans through a queue of 3 with the exporter blocked", exported)
	}
	if handled := errs(); len(handled) == 0 || !strings.Contains(handled[0].Error(), "spans dropped") {
		t.Fatalf("drops reported as %v", handled)
	}
}

func TestBatcherOnlySampled(t *testing.T) {
	s := setupBatcher(t, batchOptions{delay: time.Hour, maxQueue: 8, maxBatch: 8}, sdktrace.NeverSample())
	s.end("a", 3)
	if err := s.b.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := s.exp.got(); len(got) != 0 {
		t.Fatalf("exported %v unsampled spans", got)
	}
}

func TestBatcherFlushAndShutdown(t *testing.T) {
	s := setupBatcher(t, batchOptions{delay: time.Hour, maxQueue: 100, maxBatch: 4}, sdktrace.AlwaysSample())
	s.end("a", 10)
	if err := s.b.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, b := range s.exp.got() {
		sizes = append(sizes, len(b))
	}
	if total := sizes[0] + sizes[1] + sizes[2]; len(sizes) != 3 || total != 10 || sizes[2] > 4 {
		t.Fatalf("a flush of 10 in batches of 4 exported %v", sizes)
	}
	s.exp.err = errors.New("collector down")
	s.end("b", 1)
	if err := s.b.Shutdown(context.Background()); err == nil || !strings.Contains(err.Error(), "collector down") {
		t.Fatalf("shutdown returned %v, want the export's error", err)
	}
	if !s.exp.shutdown {
		t.Fatal("the exporter was not shut down")
	}
	if s.clk.Pending() != 0 {
		t.Fatalf("%d timers after shutdown", s.clk.Pending())
	}
	s.end("c", 1) // after shutdown: dropped, no export, no panic
	if err := s.b.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := s.exp.got(); len(got) != 4 {
		t.Fatalf("%d exports, want the 3 flushed and the one at shutdown", len(got))
	}
}

func TestReadBatchOptions(t *testing.T) {
	o, err := readBatchOptions(mapEnv(nil))
	if err != nil || o != (batchOptions{delay: 5 * time.Second, timeout: 30 * time.Second, maxQueue: 2048, maxBatch: 512}) {
		t.Fatalf("defaults %+v, %v", o, err)
	}
	o, err = readBatchOptions(mapEnv(map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "200", "OTEL_BSP_EXPORT_TIMEOUT": "0",
		"OTEL_BSP_MAX_QUEUE_SIZE": "100", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "1000"}))
	if err != nil || o != (batchOptions{delay: 200 * time.Millisecond, maxQueue: 100, maxBatch: 100}) {
		t.Fatalf("set %+v, %v", o, err)
	}
	for _, bad := range []map[string]string{{"OTEL_BSP_SCHEDULE_DELAY": "5s"}, {"OTEL_BSP_MAX_QUEUE_SIZE": "0"}, {"OTEL_BSP_EXPORT_TIMEOUT": "-1"}} {
		if _, err := readBatchOptions(mapEnv(bad)); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// BenchmarkRequestSpans is a traced request's spans, as many at once as
// the benchmark runs goroutines: a server span and the client span of
// its upstream call, their attributes set as the gateway sets them,
// batched by the SDK's batch span processor or by a batcher and
// exported by Weir's OTLP exporter to a client that drops them. The
// queue holds them all: none is dropped unexported.
// cpu-ns/op is the process's CPU time, every goroutine's.
func BenchmarkRequestSpans(b *testing.B) {
	for _, name := range []string{"sdk", "weir"} {
		b.Run(name, func(b *testing.B) {
			exp, err := newExporter(context.Background(), &discardClient{})
			if err != nil {
				b.Fatal(err)
			}
			const queue = 1 << 20 // none dropped: each exported
			var p sdktrace.SpanProcessor = sdktrace.NewBatchSpanProcessor(exp, sdktrace.WithMaxQueueSize(queue))
			if name == "weir" {
				p = newBatcher(exp, clock.Real, batchOptions{delay: 5 * time.Second, timeout: 30 * time.Second, maxQueue: queue, maxBatch: 512})
			}
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p))
			tracer := tp.Tracer(Scope)
			b.ReportAllocs()
			cpu0 := processCPU()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					requestSpans(tracer)
				}
			})
			if err := tp.ForceFlush(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
			_ = tp.Shutdown(context.Background())
		})
	}
}

// requestSpans starts and ends a request's spans as the gateway does.
func requestSpans(tracer trace.Tracer) {
	ctx, server := tracer.Start(context.Background(), "POST", trace.WithSpanKind(trace.SpanKindServer))
	_, client := tracer.Start(ctx, "chat gpt-4o-mini", trace.WithSpanKind(trace.SpanKindClient))
	client.SetAttributes(attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.provider.name", "openai"),
		attribute.String("gen_ai.request.model", "gpt-4o-mini"), attribute.String("weir.platform_model", "openai/gpt-4o-mini"),
		attribute.String("weir.platform", "openai"), attribute.Int("weir.attempt", 0), attribute.String("server.address", "api.openai.com"))
	client.SetAttributes(attribute.String("gen_ai.response.model", "gpt-4o-mini-2024-07-18"), attribute.String("gen_ai.response.id", "chatcmpl-1"),
		attribute.StringSlice("gen_ai.response.finish_reasons", []string{"stop"}))
	client.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", 31), attribute.Int("gen_ai.usage.output_tokens", 212))
	client.End()
	server.SetName("POST /v1/chat/completions")
	server.SetAttributes(attribute.String("http.request.method", "POST"), attribute.String("url.path", "/v1/chat/completions"),
		attribute.String("weir.request_id", "01J000000000000000000000"), attribute.String("http.route", "POST /v1/chat/completions"),
		attribute.Int("http.response.status_code", 200), attribute.String("weir.model", "gpt-4o-mini"), attribute.String("weir.key_id", "k1"),
		attribute.String("weir.outcome", "ok"), attribute.Float64("weir.queue.waited_ms", 0))
	server.End()
}

// processCPU is the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// mapEnv is an environment of m's variables alone.
func mapEnv(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
