package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
)

// TestErrorCodes checks every error code of docs/api.md's "Errors" that one
// gateway can produce on its own — status, error.code, error.type and
// OpenAI's error shape — and that a bad input changes nothing. queue_full,
// queue_timeout and no_candidate need a queue or a node that goes away and
// have their own tests (TestQueueFull, TestQueueTimeout,
// TestNodeKilledMidStream), which check them the same way.
func TestErrorCodes(t *testing.T) {
	t.Parallel()
	good := startUpstream(t, mock.Config{})
	bad := startUpstream(t, mock.Config{ErrorRate: 1})
	slow := startUpstream(t, mock.Config{Latency: 5 * time.Second})
	const maxBody = 4096
	g := startGateway(t, fmt.Sprintf("  max_body_bytes: %d\n  cooldown:\n    failures: 100", maxBody), fmt.Sprintf(`platforms:
  - name: good
    base_url: %s
  - name: bad
    base_url: %s
  - name: slow
    base_url: %s
    timeout: 300ms
platform_models:
  - name: good/chat
    platform: good
    upstream: gpt-4o-mini
  - name: good/emb
    platform: good
    upstream: text-embedding-3-small
  - name: good/limited
    platform: good
    upstream: gpt-4o-mini
    rpm: 1
  - name: bad/one
    platform: bad
    upstream: gpt-4o-mini
  - name: bad/two
    platform: bad
    upstream: gpt-4o
  - name: slow/chat
    platform: slow
    upstream: gpt-4o-mini
models:
  - name: chat
    kind: chat
    candidates:
      - platform_model: good/chat
  - name: emb
    kind: embeddings
    candidates:
      - platform_model: good/emb
  - name: limited
    kind: chat
    candidates:
      - platform_model: good/limited
  - name: broken
    kind: chat
    candidates:
      - platform_model: bad/one
        priority: 1
      - platform_model: bad/two
  - name: slow
    kind: chat
    candidates:
      - platform_model: slow/chat
`, good.URL, bad.URL, slow.URL))
	_, key := g.createKey(t, "--name", "all")
	_, chatOnly := g.createKey(t, "--name", "chat-only", "--models", "chat")
	revokedID, revoked := g.createKey(t, "--name", "revoked")
	runWeir(t, "keys", "revoke", "-c", g.Config, revokedID)

	const chatPath = "/v1/chat/completions"
	huge := strings.Repeat("x", maxBody+1)

	// Bad inputs: each is refused before anything is admitted or sent.
	for _, tc := range []struct {
		name   string
		req    request
		status int
		code   string
		param  string // "" for null
	}{
		{"bad JSON", request{Path: chatPath, Key: key, Body: `{"model": "chat", "messages": [`}, 400, "invalid_request", ""},
		{"not an object", request{Path: chatPath, Key: key, Body: `[{"model": "chat"}]`}, 400, "invalid_request", ""},
		{"empty body", request{Path: chatPath, Key: key}, 400, "invalid_request", ""},
		{"missing model", request{Path: chatPath, Key: key, Body: `{"messages":[{"role":"user","content":"hi"}]}`}, 400, "invalid_request", "model"},
		{"missing messages", request{Path: chatPath, Key: key, Body: `{"model":"chat"}`}, 400, "invalid_request", "messages"},
		{"messages not an array", request{Path: chatPath, Key: key, Body: `{"model":"chat","messages":"hi"}`}, 400, "invalid_request", "messages"},
		{"missing input", request{Path: "/v1/embeddings", Key: key, Body: `{"model":"emb"}`}, 400, "invalid_request", "input"},
		{"stream not a boolean", request{Path: chatPath, Key: key, Body: `{"model":"chat","stream":"yes","messages":[{"role":"user","content":"hi"}]}`}, 400, "invalid_request", "stream"},
		{"bad priority header", request{Path: chatPath, Key: key, Body: chatBody("chat"), Header: map[string]string{"X-Weir-Priority": "high"}}, 400, "invalid_request", "X-Weir-Priority"},
		{"bad max-wait header", request{Path: chatPath, Key: key, Body: chatBody("chat"), Header: map[string]string{"X-Weir-Max-Wait": "soon"}}, 400, "invalid_request", "X-Weir-Max-Wait"},
		{"model of another kind", request{Path: chatPath, Key: key, Body: chatBody("emb")}, 400, "invalid_request", "model"},
		{"no key", request{Path: chatPath, Body: chatBody("chat")}, 401, "unauthorized", ""},
		{"unknown key", request{Path: chatPath, Key: "wk-not-a-key-at-all", Body: chatBody("chat")}, 401, "unauthorized", ""},
		{"revoked key", request{Path: chatPath, Key: revoked, Body: chatBody("chat")}, 401, "unauthorized", ""},
		{"model not allowed", request{Path: "/v1/embeddings", Key: chatOnly, Body: `{"model":"emb","input":"hi"}`}, 403, "forbidden", "model"},
		{"unknown model", request{Path: chatPath, Key: key, Body: chatBody("gpt-9")}, 404, "not_found", "model"},
		{"unknown route", request{Path: "/v1/nothing", Key: key, Body: chatBody("chat")}, 404, "not_found", ""},
		{"unknown GET route", request{Method: http.MethodGet, Path: "/nothing", Key: key}, 404, "not_found", ""},
		// Not JSON at all: only a size check before parsing gives 413.
		{"body too large", request{Path: chatPath, Key: key, Body: huge}, 413, "payload_too_large", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := checkError(t, g.do(t, tc.req), tc.status, tc.code)
			switch {
			case tc.param == "" && e.Param != nil:
				t.Errorf("error.param %q, want null", *e.Param)
			case tc.param != "" && (e.Param == nil || *e.Param != tc.param):
				t.Errorf("error.param %v, want %q", e.Param, tc.param)
			}
		})
	}

	t.Run("body too large without Content-Length", func(t *testing.T) {
		// A chunked body announces no size: it is cut off while read.
		body := io.MultiReader(strings.NewReader(`{"model":"chat","messages":[{"role":"user","content":"`),
			strings.NewReader(huge), strings.NewReader(`"}]}`))
		req, err := http.NewRequest(http.MethodPost, g.URL+chatPath, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		checkError(t, &reply{Status: resp.StatusCode, Header: resp.Header, Body: b}, 413, "payload_too_large")
	})

	t.Run("the same 401 for missing, unknown and revoked keys", func(t *testing.T) {
		var bodies [][]byte
		for _, k := range []string{"", "wk-not-a-key-at-all", revoked} {
			bodies = append(bodies, g.do(t, request{Path: chatPath, Key: k, Body: chatBody("chat")}).Body)
		}
		if !bytes.Equal(bodies[0], bodies[1]) || !bytes.Equal(bodies[1], bodies[2]) {
			t.Errorf("401 bodies differ:\nmissing: %s\nunknown: %s\nrevoked: %s", bodies[0], bodies[1], bodies[2])
		}
	})

	t.Run("bad inputs change nothing", func(t *testing.T) {
		if st := good.Mock.Stats(); st.Requests != 0 || st.InFlight != 0 {
			t.Errorf("the upstream saw %d requests for bad inputs", st.Requests)
		}
		for name, s := range g.scopes(t) {
			if s.InFlight != 0 || s.Waiting != 0 {
				t.Errorf("%s: in flight %d, waiting %d after bad inputs", name, s.InFlight, s.Waiting)
			}
		}
		// And the gateway still serves.
		if rep := g.do(t, request{Path: chatPath, Key: key, Body: chatBody("chat")}); rep.Status != http.StatusOK {
			t.Errorf("a good request after the bad ones: status %d: %s", rep.Status, rep.Body)
		}
	})

	t.Run("rate_limited", func(t *testing.T) {
		// rpm 1: the first request takes the minute's only slot; the
		// second would wait about a minute, past its 30s default deadline.
		if rep := g.do(t, request{Path: chatPath, Key: key, Body: chatBody("limited")}); rep.Status != http.StatusOK {
			t.Fatalf("first request: status %d: %s", rep.Status, rep.Body)
		}
		start := time.Now()
		checkError(t, g.do(t, request{Path: chatPath, Key: key, Body: chatBody("limited")}), http.StatusTooManyRequests, "rate_limited")
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("rate_limited took %s; want it at once, not after a wait", took)
		}
	})

	t.Run("upstream_error", func(t *testing.T) {
		checkError(t, g.do(t, request{Path: chatPath, Key: key, Body: chatBody("broken")}), http.StatusBadGateway, "upstream_error")
		// Both candidates were tried, one after the other.
		if n := bad.Mock.Stats().ByStatus[http.StatusInternalServerError]; n != 2 {
			t.Errorf("the failing upstream answered 500 %d times, want 2 (one per candidate)", n)
		}
	})

	t.Run("upstream_timeout", func(t *testing.T) {
		start := time.Now()
		checkError(t, g.do(t, request{Path: chatPath, Key: key, Body: chatBody("slow")}), http.StatusGatewayTimeout, "upstream_timeout")
		if took := time.Since(start); took < 300*time.Millisecond || took > 4*time.Second {
			t.Errorf("upstream_timeout after %s, want about the platform's 300ms timeout", took)
		}
		waitFor(t, 2*time.Second, "the timed-out upstream call to be cancelled", func() bool { return slow.Mock.Stats().InFlight == 0 })
	})

	t.Run("nothing left held", func(t *testing.T) {
		waitFor(t, 2*time.Second, "every scope to be idle", func() bool {
			for _, s := range g.scopes(t) {
				if s.InFlight != 0 || s.Waiting != 0 {
					return false
				}
			}
			return true
		})
	})
}
