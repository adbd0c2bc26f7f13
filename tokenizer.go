package weir

import (
	"cmp"
	"strings"
)

// Tokenizer names the encoding a model's prompts are counted in, for its
// context window, its long-context slots, and the tokens and the cost a
// request reserves against TPM limits and budgets before the upstream
// reports its usage. Package tokens counts them.
type Tokenizer string

const (
	// TokenizerDefault, unset: a platform model's is its model's, else
	// the estimate. Counting in an encoding costs far more than the
	// estimate (docs/api.md, "Tokens"), so it is the operator's choice.
	TokenizerDefault Tokenizer = ""
	// TokenizerAuto: on an openai or azure platform, the encoding its
	// upstream model name says (DefaultTokenizer); elsewhere, and for a
	// name it does not know, the estimate.
	TokenizerAuto Tokenizer = "auto"
	// TokenizerEstimate: about four bytes a token, and a token a
	// character of three or more bytes in UTF-8 (Chinese, Japanese,
	// Korean, Thai, Devanagari, emoji). For a model whose encoding Weir
	// does not carry (Anthropic's, Gemini's, an edge node's runtime).
	TokenizerEstimate Tokenizer = "estimate"
	// TokenizerO200k is OpenAI's o200k_base: gpt-4o, gpt-4.1, gpt-5 and
	// the o-series.
	TokenizerO200k Tokenizer = "o200k_base"
	// TokenizerCL100k is OpenAI's cl100k_base: gpt-4, gpt-3.5-turbo and
	// the embeddings models.
	TokenizerCL100k Tokenizer = "cl100k_base"
)

// Tokenizers are the values a catalog may name.
var Tokenizers = []Tokenizer{TokenizerEstimate, TokenizerAuto, TokenizerO200k, TokenizerCL100k}

// Valid reports whether t is unset or one of Tokenizers.
func (t Tokenizer) Valid() bool {
	switch t {
	case TokenizerDefault, TokenizerEstimate, TokenizerAuto, TokenizerO200k, TokenizerCL100k:
		return true
	}
	return false
}

// DefaultTokenizer is the encoding of an OpenAI model by its name (a
// fine-tune's "ft:" prefix aside), or TokenizerEstimate for a name it
// does not know.
func DefaultTokenizer(upstream string) Tokenizer {
	name := strings.ToLower(strings.TrimPrefix(upstream, "ft:"))
	for _, p := range [...]struct {
		prefix string
		t      Tokenizer
	}{
		// The longer prefixes first: gpt-4o is not gpt-4's encoding.
		{"gpt-4o", TokenizerO200k}, {"chatgpt-4o", TokenizerO200k}, {"gpt-4.1", TokenizerO200k},
		{"gpt-4.5", TokenizerO200k}, {"gpt-5", TokenizerO200k},
		{"o1", TokenizerO200k}, {"o3", TokenizerO200k}, {"o4", TokenizerO200k},
		{"gpt-4", TokenizerCL100k}, {"gpt-3.5", TokenizerCL100k}, {"gpt-35", TokenizerCL100k},
		{"text-embedding-3", TokenizerCL100k}, {"text-embedding-ada-002", TokenizerCL100k},
	} {
		if strings.HasPrefix(name, p.prefix) {
			return p.t
		}
	}
	return TokenizerEstimate
}

// TokenizerOf is the encoding a request for model m is counted in on
// pm, on a platform of kind platformKind: pm's tokenizer, else m's, else
// the estimate; auto is, on an openai or azure platform,
// DefaultTokenizer of pm's upstream name, else the estimate. It is never
// TokenizerDefault or TokenizerAuto.
func TokenizerOf(m Model, pm PlatformModel, platformKind string) Tokenizer {
	return PickTokenizer(pm.Tokenizer, m.Tokenizer, AutoTokenizer(pm.Upstream, platformKind))
}

// PickTokenizer is TokenizerOf for a platform model's tokenizer pmt and
// its model's mt, where auto is what TokenizerAuto comes to on that
// platform model (AutoTokenizer): a caller that works auto out once
// picks with it as often as it likes.
func PickTokenizer(pmt, mt, auto Tokenizer) Tokenizer {
	t := cmp.Or(pmt, mt, TokenizerEstimate)
	if t == TokenizerAuto {
		return auto
	}
	return t
}

// AutoTokenizer is what TokenizerAuto comes to for upstream model name
// upstream on a platform of kind platformKind: DefaultTokenizer of the
// name on an openai or azure platform, else the estimate.
func AutoTokenizer(upstream, platformKind string) Tokenizer {
	if platformKind == "openai" || platformKind == "azure" {
		return DefaultTokenizer(upstream)
	}
	return TokenizerEstimate
}

// NodeTokenizer is the encoding a request for m is counted in on an edge
// node's provider, whose model Weir does not know: m's, else the
// estimate (auto too: a node's upstream name says nothing).
func NodeTokenizer(m Model) Tokenizer {
	if m.Tokenizer == TokenizerDefault || m.Tokenizer == TokenizerAuto {
		return TokenizerEstimate
	}
	return m.Tokenizer
}

func unknownTokenizer(t Tokenizer) *FieldError {
	names := make([]string, len(Tokenizers))
	for i, t := range Tokenizers {
		names[i] = string(t)
	}
	return invalidf("tokenizer", "unknown tokenizer %q: want %s", t, strings.Join(names, ", "))
}
