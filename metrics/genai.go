package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-gateway/weir/gateway"
)

// The GenAI client metrics of the OpenTelemetry semantic conventions
// (v1.41.0, gen-ai-metrics.md), in the names and labels their
// Prometheus translation gives them: dots become underscores, and a
// duration's unit, seconds, ends its name. Weir is the GenAI client of
// its upstreams: one upstream call is one operation. Every label is
// bounded: the operation and provider are fixed words, the models the
// catalog's (gateway.GenAIOp).

// genAILabels are the labels every GenAI metric has.
var genAILabels = []string{"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model", "gen_ai_response_model"}

// The conventions' advisory bucket boundaries: token usage's and
// operation duration's; a chunk's are the server metrics' time to first
// token and time per output token's.
var (
	tokenBuckets      = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	operationBuckets  = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	firstChunkBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	chunkBuckets      = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5}
)

// genAIMetrics are the GenAI client metrics' collectors, and the
// children an upstream call observes, cached by label values.
type genAIMetrics struct {
	tokens, duration, firstChunk, chunk *prometheus.HistogramVec

	tokensBy, durationBy, firstChunkBy *children[genAIKey, prometheus.Observer]
}

// genAIKey is the values of genAILabels and one more label: the token
// type, or the error type.
type genAIKey [5]string

// childrenOf caches vec's children by genAIKey.
func childrenOf(vec *prometheus.HistogramVec) *children[genAIKey, prometheus.Observer] {
	return newChildren(func(k genAIKey) prometheus.Observer { return vec.WithLabelValues(k[:]...) })
}

var _ gateway.GenAIMetrics = (*Metrics)(nil)

// genAICollectors makes the collectors of the GenAI client metrics.
func (m *Metrics) genAICollectors() []prometheus.Collector {
	with := func(extra ...string) []string { return append(append([]string(nil), genAILabels...), extra...) }
	g := &m.genAI
	g.tokens = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gen_ai_client_token_usage",
		Help:    "Tokens used by upstream calls, input and output (gen_ai.client.token.usage): as reported, or counted from a stream's chunks.",
		Buckets: tokenBuckets,
	}, with("gen_ai_token_type"))
	g.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gen_ai_client_operation_duration_seconds",
		Help:    "Upstream calls' duration, from the request sent to the end of the answer (gen_ai.client.operation.duration); error_type is the outcome of a call that failed, empty for one that did not.",
		Buckets: operationBuckets,
	}, with("error_type"))
	g.firstChunk = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gen_ai_client_operation_time_to_first_chunk_seconds",
		Help:    "Streamed upstream calls' time from the request sent to the first chunk received (gen_ai.client.operation.time_to_first_chunk).",
		Buckets: firstChunkBuckets,
	}, with("error_type"))
	g.chunk = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gen_ai_client_operation_time_per_output_chunk_seconds",
		Help:    "Streamed upstream calls' time between one chunk and the next, for each chunk after the first (gen_ai.client.operation.time_per_output_chunk); chunks that arrive in one read count as one.",
		Buckets: chunkBuckets,
	}, genAILabels)
	g.tokensBy, g.durationBy, g.firstChunkBy = childrenOf(g.tokens), childrenOf(g.duration), childrenOf(g.firstChunk)
	return []prometheus.Collector{g.tokens, g.duration, g.firstChunk, g.chunk}
}

// ObserveGenAI records one upstream call (gateway.GenAIMetrics).
func (m *Metrics) ObserveGenAI(c gateway.GenAICall) {
	g := &m.genAI
	op, pr, rq, rs := c.Operation, c.Provider, c.RequestModel, c.ResponseModel
	g.durationBy.get(genAIKey{op, pr, rq, rs, c.ErrorType}).Observe(c.Duration.Seconds())
	if c.Chunked {
		g.firstChunkBy.get(genAIKey{op, pr, rq, rs, c.ErrorType}).Observe(c.FirstChunk.Seconds())
	}
	if c.Tokens {
		g.tokensBy.get(genAIKey{op, pr, rq, rs, "input"}).Observe(float64(c.Input))
		if op != "embeddings" { // an embedding has no output tokens
			g.tokensBy.get(genAIKey{op, pr, rq, rs, "output"}).Observe(float64(c.Output))
		}
	}
}

// GenAIChunks is where a streamed call's gaps between chunks go
// (gateway.GenAIMetrics).
func (m *Metrics) GenAIChunks(op gateway.GenAIOp) gateway.Observer {
	return m.genAI.chunk.WithLabelValues(op.Operation, op.Provider, op.RequestModel, op.ResponseModel)
}
