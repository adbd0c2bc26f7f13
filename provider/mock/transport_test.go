package mock

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestTransport: the in-process transport answers as the Server does over
// the network: a JSON answer whole, a stream chunk by chunk, an error
// with its status and Retry-After, and no network.
func TestTransport(t *testing.T) {
	s := New(Config{MaxConcurrent: 1, RetryAfter: 3e9})
	c := &http.Client{Transport: Transport(s)}
	post := func(body string) *http.Response {
		t.Helper()
		resp, err := c.Post("http://mock.invalid/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := post(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"chat.completion"`) {
		t.Fatalf("chat: %d %s", resp.StatusCode, b)
	}
	resp = post(`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("stream content type %q", ct)
	}
	// Hold the mock's one slot with the stream while a second request
	// comes: it is refused with Retry-After.
	first, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(first, "data: ") {
		t.Fatalf("first stream line %q, %v", first, err)
	}
	busy := post(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
	busy.Body.Close()
	if busy.StatusCode != http.StatusTooManyRequests || busy.Header.Get("Retry-After") != "3" {
		t.Errorf("over the cap: %d, Retry-After %q", busy.StatusCode, busy.Header.Get("Retry-After"))
	}
	resp.Body.Close()
}
