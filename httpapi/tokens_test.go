package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/provider"
	"github.com/weir-gateway/weir/tokens"
)

// chineseChat is a chat request for model "m" whose one message is n
// Chinese characters, with max_tokens 10.
func chineseChat(n int) string {
	const text = "人工智能网关在请求之间排队而不是失败每个请求都有价格并且支出也是一种限制"
	r := []rune(strings.Repeat(text, n/len([]rune(text))+1))[:n]
	return `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"` + string(r) + `"}]}`
}

// oneNode is an edge node "n" whose provider "p" serves model "m",
// answering every call, long-context slots past longPrompt tokens.
type oneNode struct {
	longPrompt int64
	mu         sync.Mutex
	long       []bool // whether each call held a long-context slot
}

func (o *oneNode) Serving(model string) []weir.NodeTarget {
	if model != "m" {
		return nil
	}
	return []weir.NodeTarget{{Node: "n", Gen: 1, Provider: "p", Runtime: "rt", LongPromptTokens: o.longPrompt}}
}

func (o *oneNode) Do(_ context.Context, t weir.NodeTarget, _ provider.Call) (*http.Response, error) {
	o.mu.Lock()
	o.long = append(o.long, t.Long)
	o.mu.Unlock()
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"id":"x","usage":{"prompt_tokens":1,"completion_tokens":1}}`))}, nil
}

// TestChinesePromptTakesLongSlot: a Chinese prompt of 400 characters,
// which four bytes a token put under a node provider's long-context
// threshold of 350 (about 330 tokens for its 1,300 bytes), is about 400
// tokens and so takes a long-context slot, by the estimate (the model
// names no tokenizer) and by cl100k_base, which the model names.
func TestChinesePromptTakesLongSlot(t *testing.T) {
	t.Parallel()
	for _, tokenizer := range []weir.Tokenizer{"", weir.TokenizerCL100k} {
		node := &oneNode{longPrompt: 350}
		b := setup(t, setupOpts{
			gwDeps: func(d *gateway.Deps) { d.Nodes = node },
			catalog: &weir.Catalog{
				Platforms:      []weir.Platform{{Name: "up", Kind: "openai", BaseURL: "UP"}},
				PlatformModels: []weir.PlatformModel{{Name: "up/m", Platform: "up", Upstream: "gpt-4o-mini"}},
				Models: []weir.Model{{Name: "m", Kind: weir.KindChat, Tokenizer: tokenizer,
					Candidates: []weir.Candidate{{PlatformModel: "up/m", Weight: 1}}}},
			},
		})
		for _, s := range []string{weir.NodeScope("n", "p"), weir.NodeLongScope("n", "p")} {
			if err := b.engine.SetScope(t.Context(), s, admission.ScopeConfig{Limit: 1, Owner: weir.NodeOwner("n"), OwnerGen: 1}); err != nil {
				t.Fatal(err)
			}
		}
		body := chineseChat(400)
		if old := int64(len(body))/4 + 1; old > node.longPrompt {
			t.Fatalf("four bytes a token counts %d, over the threshold: the test shows nothing", old)
		}
		resp := b.post(t, "/v1/chat/completions", body, nil)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("tokenizer %q: status %d", tokenizer, resp.StatusCode)
		}
		node.mu.Lock()
		long := node.long
		node.mu.Unlock()
		if len(long) != 1 || !long[0] {
			t.Errorf("tokenizer %q: the node's calls held long slots %v; want one call, long", tokenizer, long)
		}
	}
}

// TestTPMReservesTheCount: the tokens a request reserves against a TPM
// limit are its prompt counted in the platform model's encoding (gpt-4o-
// mini's o200k_base, by its name; cl100k_base where the catalog says so)
// and its max_tokens; a TPM that four bytes a token overran takes a
// Chinese prompt that o200k_base counts under it.
func TestTPMReservesTheCount(t *testing.T) {
	t.Parallel()
	body := chineseChat(1000)
	for _, tc := range []struct {
		tokenizer weir.Tokenizer
		want      int64
	}{
		{weir.TokenizerAuto, tokens.CountJSON(weir.TokenizerO200k, []byte(body)) + 10},
		{weir.TokenizerCL100k, tokens.CountJSON(weir.TokenizerCL100k, []byte(body)) + 10},
		{weir.TokenizerEstimate, tokens.CountJSON(weir.TokenizerEstimate, []byte(body)) + 10},
	} {
		// A TPM of 1 refuses the request, saying what it reserves.
		b := setup(t, setupOpts{catalog: tpmCatalog(1, tc.tokenizer)})
		resp := b.post(t, "/v1/chat/completions", body, nil)
		e := apiErrorOf(t, resp)
		_ = resp.Body.Close()
		if want := fmt.Sprintf("up to %d tokens", tc.want); resp.StatusCode != http.StatusBadRequest || !strings.Contains(e.Message, want) {
			t.Errorf("tokenizer %q: %d %q; want 400 saying %q", tc.tokenizer, resp.StatusCode, e.Message, want)
		}
	}
	// Four bytes a token reserve more than a TPM of 720 holds; o200k_base
	// counts under it.
	if old := int64(len(body))/4 + 1 + 10; old <= 720 {
		t.Fatalf("four bytes a token reserve %d: the test shows nothing", old)
	}
	b := setup(t, setupOpts{catalog: tpmCatalog(720, weir.TokenizerAuto)})
	resp := b.post(t, "/v1/chat/completions", body, nil)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a Chinese prompt o200k_base counts under the TPM: status %d, want 200", resp.StatusCode)
	}
}

// tpmCatalog is setup's catalog with a TPM on "up/m" and its tokenizer.
func tpmCatalog(tpm int64, tokenizer weir.Tokenizer) *weir.Catalog {
	return &weir.Catalog{
		Platforms: []weir.Platform{{Name: "up", Kind: "openai", BaseURL: "UP"}},
		PlatformModels: []weir.PlatformModel{{Name: "up/m", Platform: "up", Upstream: "gpt-4o-mini", Tokenizer: tokenizer,
			Limits: weir.Limits{TPM: tpm}}},
		Models: []weir.Model{{Name: "m", Kind: weir.KindChat, Candidates: []weir.Candidate{{PlatformModel: "up/m", Weight: 1}}}},
	}
}

// TestContextWindowCountsInEncoding: a platform model's context window
// takes a prompt counted in its encoding: 1,000 Chinese characters fit
// a window of 800 in o200k_base (about 700 tokens), not by the estimate
// (about 1,000).
func TestContextWindowCountsInEncoding(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tokenizer weir.Tokenizer
		status    int
	}{{weir.TokenizerAuto, http.StatusOK}, {weir.TokenizerEstimate, http.StatusBadRequest}} {
		cat := tpmCatalog(0, tc.tokenizer)
		cat.PlatformModels[0].Supports.ContextWindow = 800
		b := setup(t, setupOpts{catalog: cat})
		resp := b.post(t, "/v1/chat/completions", chineseChat(1000), nil)
		_ = resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("tokenizer %q: status %d, want %d", tc.tokenizer, resp.StatusCode, tc.status)
		}
	}
}
