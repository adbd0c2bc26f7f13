package gateway

import (
	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/tokens"
)

// A request's prompt is counted in the encoding of the candidate it may
// go to: a platform model's (weir.TokenizerOf), an edge node's model's
// (weir.NodeTokenizer), else estimated. The count decides whether the
// candidate's context window takes the request (order), whether a node
// provider's long-context slot is needed (needsLong), the tokens it
// reserves against TPM limits and the cost it reserves against budgets
// (candidates), and the prompt tokens recorded when the upstream reports
// no usage. Counting is the Prompt's, once an encoding, when a candidate
// of that encoding is first considered: a request none of whose
// candidates has a known encoding is only estimated.

// Prompt counts a request's prompt in an encoding (package tokens'
// Prompt).
type Prompt interface {
	// Tokens is the prompt's count in t's encoding; the estimate for
	// weir.TokenizerEstimate. It is called from several goroutines.
	Tokens(t weir.Tokenizer) int64
}

// promptIn is c's prompt counted in t's encoding.
func (c *Call) promptIn(t weir.Tokenizer) int64 { return countIn(c.Prompt, c.Wants.PromptTokens, t) }

// countIn is prompt p counted in t's encoding; estimate where p is nil
// or t is the estimate.
func countIn(p Prompt, estimate int64, t weir.Tokenizer) int64 {
	if p == nil || t == weir.TokenizerEstimate {
		return estimate
	}
	return p.Tokens(t)
}

// tokensIn is what c reserves against TPM limits on a candidate of
// encoding t: its prompt counted in t, and what its answer may take.
func (c *Call) tokensIn(t weir.Tokenizer) int64 {
	return tokens.Add(c.promptIn(t), max(c.Tokens-c.Wants.PromptTokens, 0))
}

// wantsIn is c.Wants with its prompt counted in t's encoding.
func (c *Call) wantsIn(t weir.Tokenizer) weir.Wants {
	w := c.Wants
	w.PromptTokens = c.promptIn(t)
	return w
}

// tokenizer is the encoding c's prompt is counted in on t.
func (c *Call) tokenizer(t target) weir.Tokenizer {
	if t.node != nil {
		return weir.NodeTokenizer(c.Model)
	}
	return c.Snapshot.tokenizer(c.Model, t.pm)
}

// tokenizer is the encoding a request for m is counted in on platform
// model name: weir.TokenizerOf, from what the snapshot holds of name.
func (st *Snapshot) tokenizer(m weir.Model, name string) weir.Tokenizer {
	pt, ok := st.pmTokenizers[name]
	if !ok {
		return weir.TokenizerEstimate
	}
	return pt.of(m.Tokenizer)
}

// pmTokenizer is what weir.TokenizerOf reads of a platform model and its
// platform, worked out once a snapshot: a request's tokenizer then takes
// one look-up of a small value, not a copy of the platform model.
type pmTokenizer struct {
	// own is the platform model's tokenizer; "": the model's decides.
	own weir.Tokenizer
	// auto is what TokenizerAuto comes to on the platform model.
	auto weir.Tokenizer
}

func newPMTokenizer(pm weir.PlatformModel, platformKind string) pmTokenizer {
	return pmTokenizer{own: pm.Tokenizer, auto: weir.AutoTokenizer(pm.Upstream, platformKind)}
}

// of is weir.TokenizerOf for a model whose tokenizer is mt.
func (pt pmTokenizer) of(mt weir.Tokenizer) weir.Tokenizer {
	return weir.PickTokenizer(pt.own, mt, pt.auto)
}
