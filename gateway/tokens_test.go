package gateway

import (
	"testing"

	"github.com/weir-gateway/weir"
)

// TestPMTokenizerIsTokenizerOf checks the snapshot's worked-out
// tokenizers against weir.TokenizerOf over every tokenizer a model and a
// platform model may name, on each kind of platform and upstream name
// that TokenizerAuto tells apart.
func TestPMTokenizerIsTokenizerOf(t *testing.T) {
	all := append([]weir.Tokenizer{weir.TokenizerDefault}, weir.Tokenizers...)
	for _, kind := range []string{"openai", "azure", "anthropic", "gemini", "bedrock", ""} {
		for _, upstream := range []string{"gpt-4o-mini", "ft:gpt-4-0613", "gpt-3.5-turbo", "claude-3-5-sonnet", ""} {
			for _, own := range all {
				pm := weir.PlatformModel{Name: "pm", Platform: "p", Upstream: upstream, Tokenizer: own}
				pt := newPMTokenizer(pm, kind)
				for _, mt := range all {
					m := weir.Model{Name: "m", Tokenizer: mt}
					if got, want := pt.of(mt), weir.TokenizerOf(m, pm, kind); got != want {
						t.Errorf("kind %q, upstream %q, platform model's %q, model's %q: %q, want %q", kind, upstream, own, mt, got, want)
					}
				}
			}
		}
	}
}

// TestSnapshotTokenizer checks that a snapshot's tokenizer reads the
// platform models its catalog has, and estimates for one it has not.
func TestSnapshotTokenizer(t *testing.T) {
	st := &Snapshot{pmTokenizers: map[string]pmTokenizer{
		"mini": newPMTokenizer(weir.PlatformModel{Name: "mini", Upstream: "gpt-4o-mini", Tokenizer: weir.TokenizerAuto}, "openai"),
	}}
	if got := st.tokenizer(weir.Model{}, "mini"); got != weir.TokenizerO200k {
		t.Errorf("mini: %q, want %q", got, weir.TokenizerO200k)
	}
	if got := st.tokenizer(weir.Model{Tokenizer: weir.TokenizerCL100k}, "gone"); got != weir.TokenizerEstimate {
		t.Errorf("a platform model not in the catalog: %q, want %q", got, weir.TokenizerEstimate)
	}
}
