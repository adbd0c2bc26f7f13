package mock

import (
	"net/http"
	"testing"
)

// TestChatUsageReport: X-Mock-Usage (or metadata.mock_usage) changes the
// usage a chat completion reports, streamed or not, and "none" leaves it
// out; the answer itself is as ever.
func TestChatUsageReport(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{CompletionTokens: 7})
	usageOf := func(m map[string]any) (prompt, completion, cached any) {
		u, ok := m["usage"].(map[string]any)
		if !ok {
			return nil, nil, nil
		}
		return u["prompt_tokens"], u["completion_tokens"], u["prompt_tokens_details"].(map[string]any)["cached_tokens"]
	}
	h := map[string]string{"X-Mock-Usage": "prompt=900,cached=512"}
	m := obj(t, expectStatus(t, f.post("/v1/chat/completions", chatBody, h), http.StatusOK))
	if p, c, ca := usageOf(m); p != 900.0 || c != 7.0 || ca != 512.0 {
		t.Errorf("header: usage %v %v %v; want 900, 7 (as counted), 512", p, c, ca)
	}
	meta := chatWith(map[string]any{"metadata": map[string]any{"mock_usage": "completion=40"}})
	m = obj(t, expectStatus(t, f.post("/v1/chat/completions", meta, nil), http.StatusOK))
	if p, c, ca := usageOf(m); p != 14.0 || c != 40.0 || ca != 0.0 {
		t.Errorf("metadata: usage %v %v %v; want 14 (as counted), 40, 0", p, c, ca)
	}
	m = obj(t, expectStatus(t, f.post("/v1/chat/completions", chatBody, map[string]string{"X-Mock-Usage": "none"}), http.StatusOK))
	if _, has := m["usage"]; has || m["choices"] == nil {
		t.Errorf("none: %v; want an answer without usage", m)
	}

	stream := chatWith(map[string]any{"stream": true, "stream_options": map[string]any{"include_usage": true},
		"metadata": map[string]any{"mock_usage": "prompt=5,completion=6,cached=1"}})
	chunks := streamChunks(t, f.post("/v1/chat/completions", stream, nil))
	if p, c, ca := usageOf(chunks[len(chunks)-1]); p != 5.0 || c != 6.0 || ca != 1.0 {
		t.Errorf("stream: usage %v %v %v; want 5, 6, 1", p, c, ca)
	}
	stream["metadata"] = map[string]any{"mock_usage": "none"}
	chunks = streamChunks(t, f.post("/v1/chat/completions", stream, nil))
	for i, c := range chunks {
		if c["usage"] != nil {
			t.Errorf("stream with none: chunk %d has usage %v", i, c["usage"])
		}
	}

	for _, bad := range []string{"prompt", "prompt=-1", "tokens=5", "prompt=x"} {
		expectStatus(t, f.post("/v1/chat/completions", chatBody, map[string]string{"X-Mock-Usage": bad}), http.StatusBadRequest)
	}
	bad := chatWith(map[string]any{"metadata": map[string]any{"mock_usage": "lots"}})
	expectStatus(t, f.post("/v1/chat/completions", bad, nil), http.StatusBadRequest)
}
