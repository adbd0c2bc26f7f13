package provider

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestOpenAIHeaders: a call sends the platform's key as a bearer token,
// JSON, the client's User-Agent and what the client accepts (its first
// value), or an event stream for a stream; a key changed between calls
// is the one sent.
func TestOpenAIHeaders(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got <- r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{}`)
	}))
	t.Cleanup(srv.Close)
	o := &OpenAI{BaseURL: srv.URL + "/", APIKey: "sk-one"}
	client := http.Header{"Accept": {"application/json", "text/plain"}, "User-Agent": {"sdk/1"}, "Cookie": {"c=1"}}
	for _, tc := range []struct {
		key    string
		stream bool
		accept string
	}{
		{"sk-one", false, "application/json"},
		{"sk-one", true, "text/event-stream"},
		{"sk-two", false, "application/json"},
	} {
		o.APIKey = tc.key
		resp, err := o.Do(t.Context(), Call{Path: "/chat/completions", Body: []byte(`{}`), Stream: tc.stream, Header: client})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		h := <-got
		if h.Get("Authorization") != "Bearer "+tc.key || h.Get("Content-Type") != "application/json" ||
			h.Get("User-Agent") != "sdk/1" || len(h.Values("Accept")) != 1 || h.Get("Accept") != tc.accept || h.Get("Cookie") != "" {
			t.Errorf("key %s, stream %v: headers sent %v", tc.key, tc.stream, h)
		}
	}
	if v := client["Accept"]; len(v) != 2 || v[0] != "application/json" {
		t.Errorf("the client's headers changed: %v", client)
	}
}
