package weir_test

import (
	"testing"

	"github.com/weir-gateway/weir"
)

func TestDefaultTokenizer(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]weir.Tokenizer{
		"gpt-4o": weir.TokenizerO200k, "gpt-4o-mini-2024-07-18": weir.TokenizerO200k, "GPT-4.1": weir.TokenizerO200k,
		"gpt-5": weir.TokenizerO200k, "o3-mini": weir.TokenizerO200k, "ft:gpt-4o-mini:acme::x1": weir.TokenizerO200k,
		"gpt-4": weir.TokenizerCL100k, "gpt-4-turbo": weir.TokenizerCL100k, "gpt-3.5-turbo": weir.TokenizerCL100k,
		"text-embedding-3-small": weir.TokenizerCL100k, "text-embedding-ada-002": weir.TokenizerCL100k,
		"claude-sonnet-4": weir.TokenizerEstimate, "meta-llama/Llama-3.1-8B": weir.TokenizerEstimate, "": weir.TokenizerEstimate,
	} {
		if got := weir.DefaultTokenizer(name); got != want {
			t.Errorf("DefaultTokenizer(%q) = %q, want %q", name, got, want)
		}
	}
}

// A platform model's tokenizer comes before its model's; unset is the
// estimate, and auto the encoding an openai or azure platform's upstream
// name says.
func TestTokenizerOf(t *testing.T) {
	t.Parallel()
	pm := weir.PlatformModel{Upstream: "gpt-4o"}
	for _, tc := range []struct {
		name      string
		pm, model weir.Tokenizer
		kind      string
		want      weir.Tokenizer
	}{
		{"unset is the estimate", "", "", "openai", weir.TokenizerEstimate},
		{"auto by name", weir.TokenizerAuto, "", "openai", weir.TokenizerO200k},
		{"auto by name on azure", "", weir.TokenizerAuto, "azure", weir.TokenizerO200k},
		{"auto on anthropic keeps the estimate", weir.TokenizerAuto, "", "anthropic", weir.TokenizerEstimate},
		{"the model's", "", weir.TokenizerCL100k, "openai", weir.TokenizerCL100k},
		{"the platform model's", weir.TokenizerEstimate, weir.TokenizerCL100k, "openai", weir.TokenizerEstimate},
		{"set on gemini", weir.TokenizerO200k, "", "gemini", weir.TokenizerO200k},
	} {
		pm.Tokenizer = tc.pm
		if got := weir.TokenizerOf(weir.Model{Tokenizer: tc.model}, pm, tc.kind); got != tc.want {
			t.Errorf("%s: TokenizerOf = %q, want %q", tc.name, got, tc.want)
		}
	}
	for _, m := range []weir.Tokenizer{"", weir.TokenizerAuto} {
		if got := weir.NodeTokenizer(weir.Model{Tokenizer: m}); got != weir.TokenizerEstimate {
			t.Errorf("NodeTokenizer of a model naming %q = %q, want estimate", m, got)
		}
	}
}
