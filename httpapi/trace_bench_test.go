package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-gateway/weir/tracing"
)

// BenchmarkChatTraced is BenchmarkChat untraced and traced: each traced
// request a sampled root, its spans batched and exported by OTLP/HTTP
// (tracing.New, as weir serve makes it) to a receiver in this process
// that reads and drops them. The spans still batched are exported
// before the clock stops, so ns/op and cpu-ns/op (the process's CPU
// time, every goroutine's: the exporter's and the receiver's too) hold
// all that tracing costs; allocs/op counts the exporter's as well.
// ns-to-answer/op is the part of ns/op until the answer was first
// flushed (a stream's: its first chunk), what a client waits for; the
// rest is the work after it (the spans' ends, the usage record, the log
// line).
func BenchmarkChatTraced(b *testing.B) {
	benchTraced(b, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
}

// BenchmarkChatStreamTraced is BenchmarkChatTraced's request streamed,
// its usage reported in its last chunk: the span's response attributes
// are read from the chunks as they pass.
func BenchmarkChatStreamTraced(b *testing.B) {
	benchTraced(b, `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
}

// benchTraced serves body untraced and traced, as BenchmarkChatTraced
// says.
func benchTraced(b *testing.B, body string) {
	header := http.Header{"Authorization": nil}
	for _, traced := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[traced]
		b.Run(name, func(b *testing.B) {
			var p *tracing.Provider
			o := setupOpts{}
			if traced {
				sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body)
					w.Header().Set("Content-Type", "application/x-protobuf")
				}))
				b.Cleanup(sink.Close)
				var err error
				p, err = tracing.New(context.Background(), tracing.Config{Getenv: func(string) string { return "" }, Endpoint: sink.URL})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = p.Shutdown(context.Background()) })
				o.deps = func(d *Deps) { d.Tracing = p.TracerProvider() }
			}
			bundle := setup(b, o)
			header["Authorization"] = []string{"Bearer " + bundle.key}
			h := bundle.srv.Handler()
			b.ReportAllocs()
			cpu0 := processCPU()
			var toAnswer time.Duration
			b.ResetTimer()
			for range b.N {
				r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
				r.Header = header.Clone()
				w := &flushTimed{ResponseRecorder: httptest.NewRecorder()}
				t0 := time.Now()
				h.ServeHTTP(w, r)
				toAnswer += w.at.Sub(t0)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
			b.ReportMetric(float64(toAnswer)/float64(b.N), "ns-to-answer/op")
			if p != nil {
				if err := p.TracerProvider().ForceFlush(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// flushTimed is a recorder that notes when the answer was first
// flushed.
type flushTimed struct {
	*httptest.ResponseRecorder
	at time.Time
}

func (f *flushTimed) Flush() {
	if f.at.IsZero() {
		f.at = time.Now()
	}
	f.ResponseRecorder.Flush()
}
