package main

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir/bench"
)

// trace-overhead against serve.Main, briefly, over three rounds: the
// three gateways restarted every round with their roles turned, every
// request answered, the judged line and the A/A line after the rounds,
// and spans at the receiver.
func TestBenchTracingInterleavedThroughMain(t *testing.T) {
	if testing.Short() {
		t.Skip("drives load for a few seconds")
	}
	var out strings.Builder
	err := bench.Overhead(t.Context(), &out, bench.OverheadConfig{
		Weir: testWeir(t), Rate: 250, Warmup: 100 * time.Millisecond, Duration: 400 * time.Millisecond, Rounds: 3, Concurrency: 16,
		CompletionTokens: 80, ProfileTarget: "weir", Tracing: true, Interleave: true,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	text := out.String()
	lines := strings.Split(text, "\n")
	for _, target := range []string{"direct ", "proxy ", "weir ", "weir+trace ", "weir' "} {
		// Each round's line, the medians' and the cost pass's.
		n := len(slices.DeleteFunc(slices.Clone(lines), func(l string) bool {
			return !strings.HasPrefix(l, target) || !strings.Contains(l, " 100.00 ")
		}))
		if n != 5 {
			t.Errorf("%d lines for %s with 100%% success, want 5 (3 rounds, medians, cost pass):\n%s", n, target, text)
		}
	}
	// 250 req/s over 5 targets for 400ms: 20 measured requests each.
	if n := strings.Count(text, "requests measured: direct 20, proxy 20, weir 20, weir+trace 20, weir' 20\n"); n != 3 {
		t.Errorf("%d rounds gave each target its 20 requests, want 3:\n%s", n, text)
	}
	for _, want := range []string{
		"gateways: weir A, weir+trace B, weir' C (started A, B, C)\n",
		"gateways: weir B, weir+trace C, weir' A (started A, B, C, restarted)\n",
		"gateways: weir C, weir+trace A, weir' B (started A, B, C, restarted)\n",
		"weir+trace/weir added: p50 ", "weir'/weir added: p50 ",
		"weir+trace/weir added latency, round by round (instances): ", "(B/A)  ", "(C/B)  ", "(A/C)\n",
		"weir'/weir added latency, round by round (instances): ",
		"trace-overhead: weir+trace/weir added p50 ",
		"medians of 3 rounds' ratios (target <= 1.15x: ",
		"each instance traced in as many rounds)",
		"A/A, two untraced instances: weir'/weir added p50 ",
		"weir+trace-weir: cpu ", "weir'-weir: cpu ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "failures:") {
		t.Errorf("requests failed:\n%s", text)
	}
	m := regexp.MustCompile(`weir\+trace exported (\d+) OTLP/HTTP requests`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no receiver line:\n%s", text)
	}
	if n, _ := strconv.Atoi(m[1]); n < 3 {
		t.Errorf("the receiver took %d exports, want one at least from each round's traced gateway", n)
	}
}

// --tracing refuses an environment that would trace the untraced
// gateways too, and warns of a sampler.
func TestTracingEnv(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env       map[string]string
		err, warn string
	}{
		{env: map[string]string{}},
		{env: map[string]string{"OTEL_SERVICE_NAME": "bench"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, err: "turns tracing on for every gateway"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, err: "turns tracing on for every gateway"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTEL_TRACES_EXPORTER"},
		{env: map[string]string{"OTEL_TRACES_SAMPLER": "always_off"}, warn: "OTEL_TRACES_SAMPLER=always_off: weir+trace samples as it says"},
	} {
		var out strings.Builder
		err := tracingEnv(&out, func(k string) string { return tc.env[k] })
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%v: %v", tc.env, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%v: error %v, want one saying %q", tc.env, err, tc.err)
		}
		if !strings.Contains(out.String(), tc.warn) || (tc.warn == "" && out.Len() > 0) {
			t.Errorf("%v: printed %q, want %q", tc.env, out.String(), tc.warn)
		}
	}
}
