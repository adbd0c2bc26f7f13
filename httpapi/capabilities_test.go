package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/task"
)

// TestUnservableRefusedAtOnce: a request that no candidate's capabilities
// cover — too long for the context window, tools to a model without
// them, a size none takes — is answered 400 no_candidate at once, naming
// the parameter, and reaches no upstream; one a candidate covers is
// served by it, and a plain request is unaffected.
func TestUnservableRefusedAtOnce(t *testing.T) {
	t.Parallel()
	no := false
	cat := weir.Catalog{
		Platforms: []weir.Platform{{Name: "up", Kind: "openai", BaseURL: "UP"}},
		PlatformModels: []weir.PlatformModel{
			{Name: "up/small", Platform: "up", Upstream: "gpt-4o-mini", Supports: weir.Capabilities{ContextWindow: 1_000, Tools: &no}},
			{Name: "up/tools", Platform: "up", Upstream: "gpt-4o", Supports: weir.Capabilities{ContextWindow: 1_000, MaxOutputTokens: 500}},
			{Name: "up/img", Platform: "up", Upstream: "gpt-image-1", Supports: weir.Capabilities{Sizes: []string{"1024x1024"}}},
		},
		Models: []weir.Model{
			{Name: "m", Kind: weir.KindChat, Candidates: []weir.Candidate{{PlatformModel: "up/small", Priority: 2, Weight: 1}, {PlatformModel: "up/tools", Priority: 1, Weight: 1}}},
			{Name: "img", Kind: weir.KindImages, Candidates: []weir.Candidate{{PlatformModel: "up/img", Weight: 1}}},
		},
	}
	b := setup(t, setupOpts{catalog: &cat})
	chat := func(extra string) string {
		return `{"model":"m","messages":[{"role":"user","content":"hi"}]` + extra + `}`
	}
	long := fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":%q}]}`, strings.Repeat("word ", 2_000))
	tools := `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`
	for _, c := range []struct {
		what, path, body, param string
	}{
		{"a prompt over every context window", "/v1/chat/completions", long, "messages"},
		{"tools, and max_tokens over the one candidate with tools", "/v1/chat/completions", chat(tools + `,"max_tokens":800`), "tools"},
		{"a size no candidate takes", "/v1/images/generations", `{"model":"img","prompt":"a cat","size":"256x256"}`, "size"},
	} {
		before := b.mock.Stats().Requests
		resp, out := b.call(t, http.MethodPost, c.path, b.key, c.body, nil)
		e := wantError(t, resp, out, http.StatusBadRequest, weir.CodeNoCandidate, c.param)
		if e.Type != "invalid_request_error" {
			t.Errorf("%s: type %q; want invalid_request_error", c.what, e.Type)
		}
		if strings.Contains(c.what, "max_tokens") && (!strings.Contains(e.Message, "no tools") || !strings.Contains(e.Message, "max_tokens 800")) {
			t.Errorf("%s: message %q; want each candidate's reason", c.what, e.Message)
		}
		if n := b.mock.Stats().Requests - before; n != 0 {
			t.Errorf("%s: %d requests reached the upstream", c.what, n)
		}
	}
	type completion struct{ Model string }
	if got := callAs[completion](t, b, http.StatusOK, http.MethodPost, "/v1/chat/completions", b.key, chat(tools), nil); got.Model != "gpt-4o" {
		t.Errorf("a request with tools was served by %q; want up/tools' gpt-4o", got.Model)
	}
	if got := callAs[completion](t, b, http.StatusOK, http.MethodPost, "/v1/chat/completions", b.key, chat(""), nil); got.Model != "gpt-4o-mini" {
		t.Errorf("a plain request was served by %q; want the first candidate's gpt-4o-mini", got.Model)
	}
}

// TestDecodeWants: what a body needs of a candidate is read from it.
func TestDecodeWants(t *testing.T) {
	for _, c := range []struct {
		ep   endpoint
		body string
		want weir.Wants
	}{
		{epChat, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, weir.Wants{}},
		{epChat, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"data:,"}}]}]}`, weir.Wants{Vision: true}},
		{epChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function"}]}`, weir.Wants{Tools: true}},
		{epChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[]}`, weir.Wants{}},
		{epChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"functions":[{"name":"f"}]}`, weir.Wants{Tools: true}},
		{epChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema"}}`, weir.Wants{JSONOutput: true}},
		{epChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"text"}}`, weir.Wants{}},
		{epChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":9}`, weir.Wants{Stream: true, MaxTokens: 9}},
		{epImages, `{"model":"m","prompt":"p","size":"1024x1024"}`, weir.Wants{Size: "1024x1024"}},
		{epImages, `{"model":"m","prompt":"p","size":"1024x1024","quality":"hd","n":3}`, weir.Wants{Size: "1024x1024", Quality: "hd", N: 3}},
		{epImages, `{"model":"m","prompt":"p","n":"three"}`, weir.Wants{}},
		{epImages, `{"model":"m","prompt":"p","n":-2}`, weir.Wants{}},
		{epSpeech, `{"model":"m","input":"hi","voice":"alloy"}`, weir.Wants{Voice: "alloy", Characters: 2}},
		{epSpeech, `{"model":"m","input":"héllo ✓","voice":"alloy"}`, weir.Wants{Voice: "alloy", Characters: 7}},
	} {
		r, err := decodeRequest(c.ep, []byte(c.body))
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		got := r.wants
		got.PromptTokens = 0
		if got != c.want {
			t.Errorf("%s: wants %+v; want %+v", c.body, got, c.want)
		}
		if r.wants.PromptTokens <= 0 {
			t.Errorf("%s: no prompt estimate", c.body)
		}
	}
}

// TestUnservableTaskRefused: a video whose seconds or size no candidate
// makes is refused at submission, 400 no_candidate naming the parameter,
// and nothing is stored; one within them is accepted.
func TestUnservableTaskRefused(t *testing.T) {
	t.Parallel()
	cat := weir.Catalog{
		Platforms:      []weir.Platform{{Name: "up", Kind: "openai", BaseURL: "UP"}},
		PlatformModels: []weir.PlatformModel{{Name: "up/v", Platform: "up", Upstream: "sora-2", Supports: weir.Capabilities{Seconds: []int{4, 8}, Sizes: []string{"1280x720"}}}},
		Models:         []weir.Model{{Name: "v", Kind: weir.KindVideo, Candidates: []weir.Candidate{{PlatformModel: "up/v", Weight: 1}}}},
	}
	b := setup(t, setupOpts{catalog: &cat, tasks: &task.Config{}})
	for _, c := range []struct{ body, param string }{
		{`{"model":"v","prompt":"a weir","seconds":"12"}`, "seconds"},
		{`{"model":"v","prompt":"a weir","seconds":"4","size":"720x1280"}`, "size"},
	} {
		resp, out := b.call(t, http.MethodPost, "/v1/videos", b.key, c.body, nil)
		wantError(t, resp, out, http.StatusBadRequest, weir.CodeNoCandidate, c.param)
	}
	// A task asked to be simulated by a group that may not is refused,
	// never run for real.
	resp, out := b.call(t, http.MethodPost, "/v1/videos", b.key, `{"model":"v","prompt":"a weir","seconds":"4"}`, http.Header{HeaderRunMode: {"simulation"}})
	wantError(t, resp, out, http.StatusForbidden, weir.CodeForbidden, HeaderRunMode)
	if ts, err := b.db.TaskList(t.Context(), weir.TaskFilter{Limit: 10}); err != nil || len(ts) != 0 {
		t.Errorf("tasks stored after the refusals: %d, %v", len(ts), err)
	}
	resp, out = b.call(t, http.MethodPost, "/v1/videos", b.key, `{"model":"v","prompt":"a weir","seconds":"8","size":"1280x720"}`, nil)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a video within the capabilities: %d %s", resp.StatusCode, out)
	}
}

// TestAffinityKeys: a chat's affinity key is its prompt_cache_key, else
// its user, else its first message: requests sharing a system prompt
// share it, whatever follows.
func TestAffinityKeys(t *testing.T) {
	key := func(body string) string {
		t.Helper()
		r, err := decodeRequest(epChat, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return r.affinity
	}
	sys := `{"role":"system","content":"You are a weir keeper."}`
	a := key(`{"model":"m","messages":[` + sys + `,{"role":"user","content":"one"}]}`)
	b := key(`{"model":"m","messages":[` + sys + `,{"role":"user","content":"two"}]}`)
	c := key(`{"model":"m","messages":[{"role":"system","content":"Another."},{"role":"user","content":"one"}]}`)
	if a == "" || a != b || a == c {
		t.Errorf("first-message keys %q, %q, %q; want the first two equal, the third apart", a, b, c)
	}
	if got := key(`{"model":"m","messages":[` + sys + `],"user":"u1","prompt_cache_key":"conv-9"}`); got != "k:conv-9" {
		t.Errorf("with prompt_cache_key: %q", got)
	}
	if got := key(`{"model":"m","messages":[` + sys + `],"user":"u1"}`); got != "u:u1" {
		t.Errorf("with user: %q", got)
	}
}
