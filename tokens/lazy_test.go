package tokens

import (
	"testing"

	"github.com/weir-gateway/weir"
)

// An encoding is loaded when a text is first counted in it, and only
// then: estimating loads none. (Not parallel: it runs before the tests
// that load them.)
func TestEncodingsLoadOnFirstUse(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"你好, world"}]}`)
	CountJSON(weir.TokenizerEstimate, body)
	NewPrompt(body).Tokens(weir.TokenizerEstimate)
	if loaded[slot(weir.TokenizerO200k)].Load() || loaded[slot(weir.TokenizerCL100k)].Load() {
		t.Fatal("estimating loaded an encoding")
	}
	CountJSON(weir.TokenizerCL100k, body)
	if !loaded[slot(weir.TokenizerCL100k)].Load() || loaded[slot(weir.TokenizerO200k)].Load() {
		t.Errorf("counting in cl100k_base loaded o200k_base %v, cl100k_base %v; want only cl100k_base",
			loaded[slot(weir.TokenizerO200k)].Load(), loaded[slot(weir.TokenizerCL100k)].Load())
	}
}
