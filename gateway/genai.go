package gateway

import (
	"time"

	"github.com/weir-gateway/weir"
)

// GenAIMetrics receives each upstream call measured as the OpenTelemetry
// GenAI semantic conventions measure a client's operation: Weir is the
// GenAI client of its upstreams. metrics.Metrics implements it.
type GenAIMetrics interface {
	// ObserveGenAI records one upstream call once it is over.
	ObserveGenAI(c GenAICall)
	// GenAIChunks is where the gaps between a streamed call's chunks
	// go, in seconds, as they arrive: it is asked once per call.
	GenAIChunks(op GenAIOp) Observer
}

// Observer takes measurements (prometheus.Observer is one).
type Observer interface{ Observe(float64) }

// GenAIOp is what names an upstream call in the GenAI conventions, each
// a bounded word: the operation (chat, embeddings, generate_content), the
// provider (gen_ai.provider.name: openai, anthropic, gcp.gemini,
// azure.ai.openai, aws.bedrock; weir.node for an edge node), the model
// asked (the catalog's public model) and the model that answered (the
// platform model's upstream name in the catalog; "other" for an edge
// node's runtime, which the catalog does not name).
type GenAIOp struct {
	Operation, Provider, RequestModel, ResponseModel string
}

// GenAICall is one upstream call's measurements.
type GenAICall struct {
	GenAIOp
	// ErrorType is the call's outcome if it failed (an upstream status
	// such as "503", timeout, connect_error, upstream_broken...); ""
	// when it succeeded.
	ErrorType string
	// Duration runs from the request sent upstream to the end of its
	// answer (a stream's last chunk).
	Duration time.Duration
	// Tokens: the call's usage is known (reported, or counted from a
	// stream's chunks), and is Input and Output.
	Tokens        bool
	Input, Output int64
	// FirstChunk, for a stream that sent one (Chunked), runs from the
	// request sent to its first chunk.
	Chunked    bool
	FirstChunk time.Duration
}

// OtherModel is the model label of a model the catalog does not name.
const OtherModel = "other"

// providerNames maps platform kinds (weir.PlatformKinds) to the
// conventions' gen_ai.provider.name.
var providerNames = map[string]string{
	"openai": "openai", "anthropic": "anthropic", "gemini": "gcp.gemini",
	"azure": "azure.ai.openai", "bedrock": "aws.bedrock",
}

// nodeProvider is the provider name of an edge node's runtime.
const nodeProvider = "weir.node"

// genAIOperation is the conventions' operation name of a model kind.
func genAIOperation(k weir.ModelKind) string {
	switch k {
	case weir.KindChat:
		return "chat"
	case weir.KindEmbeddings:
		return "embeddings"
	}
	return "generate_content" // images and speech
}

// callObs is what the current upstream attempt of a call measured for
// the GenAI metrics; attempt starts it afresh.
type callObs struct {
	op GenAIOp
	// t0 is when the request went upstream; end, when its answer ended.
	t0, end time.Time
	// first and last are a stream's first and latest chunk's arrival.
	first, last time.Time
	gaps        Observer
	tokens      bool
	in, out     int64
	// reported: the upstream reported the usage (not counted from a
	// stream's chunks).
	reported bool
	// notes are what a traced attempt's span is told of the answer
	// (traceanswer.go); nil for an untraced one, which holds nothing
	// of them.
	notes *answerNotes
}

// startObs begins measuring c's attempt on pm, sent at t0, in o.
func (s *Service) startObs(c *Call, o *callObs, pm upstream, t0 time.Time) {
	c.Attempts++
	*o = callObs{t0: t0}
	c.obs = o
	if s.deps.GenAI == nil || pm.provider == "" {
		return
	}
	c.obs.op = GenAIOp{Operation: genAIOperation(c.Model.Kind), Provider: pm.provider,
		RequestModel: c.Model.Name, ResponseModel: pm.responseModel}
	if c.Stream {
		c.obs.gaps = s.deps.GenAI.GenAIChunks(c.obs.op)
	}
}

// chunk notes that a read of a streamed answer brought chunks at now.
func (o *callObs) chunk(now time.Time) {
	if o.first.IsZero() {
		o.first = now
	} else if o.gaps != nil {
		o.gaps.Observe(now.Sub(o.last).Seconds())
	}
	o.last = now
}

// ended notes that the upstream's answer ended at now, with its usage u
// if got.
func (o *callObs) ended(now time.Time, u usage, got bool) {
	if o.end.IsZero() {
		o.end = now
	}
	if got {
		o.tokens, o.in, o.out, o.reported = true, u.PromptTokens, u.CompletionTokens, !u.counted
	}
}

// observeCall counts c's upstream call to pm, ended in outcome, whose
// answer's headers came in after headersIn: Weir's own upstream metrics
// and the GenAI conventions'.
func (s *Service) observeCall(c *Call, pm upstream, outcome Outcome, headersIn time.Duration) {
	s.deps.Metrics.ObserveUpstream(pm.Name, string(outcome), headersIn)
	o := c.obs
	if o.end.IsZero() {
		o.end = s.deps.Clock.Now()
	}
	if s.deps.GenAI == nil || o.op.Provider == "" {
		return
	}
	g := GenAICall{GenAIOp: o.op, Duration: o.end.Sub(o.t0), Tokens: o.tokens, Input: o.in, Output: o.out}
	if outcome != OutcomeOK {
		g.ErrorType = string(outcome)
	}
	if !o.first.IsZero() {
		g.Chunked, g.FirstChunk = true, o.first.Sub(o.t0)
	}
	s.deps.GenAI.ObserveGenAI(g)
}
