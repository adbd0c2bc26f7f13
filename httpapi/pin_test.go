package httpapi

import (
	"net/http"
	"testing"

	"github.com/weir-gateway/weir"
)

// TestPinPlatform: a key whose group may pin a platform is served only
// by that platform's candidate, though another comes first; a group that
// may not is refused 403, an unknown platform or one without a candidate
// of the model 400.
func TestPinPlatform(t *testing.T) {
	t.Parallel()
	var usage usageLog
	cat := weir.Catalog{
		Platforms: []weir.Platform{{Name: "up", Kind: "openai", BaseURL: "UP"}, {Name: "up2", Kind: "openai", BaseURL: "UP"}},
		PlatformModels: []weir.PlatformModel{
			{Name: "up/m", Platform: "up", Upstream: "gpt-4o-mini"},
			{Name: "up2/m", Platform: "up2", Upstream: "gpt-4o-mini"},
			{Name: "up/e", Platform: "up", Upstream: "text-embedding-3-small"},
		},
		Models: []weir.Model{
			{Name: "m", Kind: weir.KindChat, Candidates: []weir.Candidate{{PlatformModel: "up/m", Priority: 2, Weight: 1}, {PlatformModel: "up2/m", Priority: 1, Weight: 1}}},
			{Name: "e", Kind: weir.KindEmbeddings, Candidates: []weir.Candidate{{PlatformModel: "up/e", Weight: 1}}},
		},
		Groups: []weir.Group{{Name: "default", PinPlatform: true}, {Name: "plain"}},
	}
	b := setup(t, setupOpts{catalog: &cat, deps: func(d *Deps) { d.Usage = usage.record }})
	chat := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	pin := func(p string) http.Header { return http.Header{HeaderPlatform: {p}} }
	for range 3 {
		if resp, out := b.call(t, http.MethodPost, "/v1/chat/completions", b.key, chat, pin("up2")); resp.StatusCode != http.StatusOK {
			t.Fatalf("pinned to up2: %d %s", resp.StatusCode, out)
		}
	}
	for _, u := range usage.wait(t, 3) {
		if u.PlatformModel != "up2/m" {
			t.Errorf("a request pinned to up2 served by %q", u.PlatformModel)
		}
	}

	resp, out := b.call(t, http.MethodPost, "/v1/chat/completions", b.key, chat, pin("nope"))
	wantError(t, resp, out, http.StatusBadRequest, weir.CodeInvalidRequest, HeaderPlatform)
	resp, out = b.call(t, http.MethodPost, "/v1/embeddings", b.key, `{"model":"e","input":"hi"}`, pin("up2"))
	wantError(t, resp, out, http.StatusBadRequest, weir.CodeNoCandidate, HeaderPlatform)
	plain := b.newKey(t, weir.APIKey{Group: "plain"})
	resp, out = b.call(t, http.MethodPost, "/v1/chat/completions", plain, chat, pin("up"))
	wantError(t, resp, out, http.StatusForbidden, weir.CodeForbidden, HeaderPlatform)
}
