package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
)

// allKinds is a catalog with a model of every kind on one mock provider.
func allKinds(url string) string {
	return fmt.Sprintf(`platforms:
  - name: up
    base_url: %s
platform_models:
  - name: up/chat
    platform: up
    upstream: gpt-4o-mini
    concurrency: 4
  - name: up/emb
    platform: up
    upstream: text-embedding-3-small
  - name: up/img
    platform: up
    upstream: gpt-image-1
  - name: up/tts
    platform: up
    upstream: tts-1
models:
  - name: chat
    kind: chat
    candidates:
      - platform_model: up/chat
  - name: emb
    kind: embeddings
    candidates:
      - platform_model: up/emb
  - name: img
    kind: images
    candidates:
      - platform_model: up/img
  - name: tts
    kind: audio_speech
    candidates:
      - platform_model: up/tts
`, url)
}

// TestStreamingPassthrough: a streamed chat completion reaches the client
// chunk by chunk as the upstream makes it — the first chunk arrives while
// the upstream is still generating — in SSE form ending with data: [DONE],
// and says the same as the non-streamed answer.
func TestStreamingPassthrough(t *testing.T) {
	t.Parallel()
	const tokens = 10
	// 10 tokens at 20 a second: about half a second of generation.
	up := startUpstream(t, mock.Config{TokensPerSecond: 20, CompletionTokens: tokens})
	g := startGateway(t, "", oneModel(up.URL, "    concurrency: 2"))
	_, key := g.createKey(t)

	resp := g.open(t, context.Background(), request{Path: "/v1/chat/completions", Key: key, Body: streamBody("chat")})
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("Content-Type %q, want text/event-stream", ct)
	}
	if resp.Header.Get("X-Weir-Queue-Wait-Ms") == "" || resp.Header.Get("X-Request-Id") == "" {
		t.Errorf("missing X-Weir-Queue-Wait-Ms or X-Request-Id: %v", resp.Header)
	}
	// Read the first event alone, then check the upstream is still at work.
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(first, "data: {") {
		t.Fatalf("first line %q, %v: want a data event", first, err)
	}
	if n := up.Mock.Stats().InFlight; n != 1 {
		t.Errorf("the first chunk reached the client after the upstream finished (upstream in flight %d): the stream was buffered", n)
	}
	events, err := readSSE(io.MultiReader(strings.NewReader(first), br))
	if err != nil {
		t.Fatal(err)
	}
	if len(events) == 0 || events[len(events)-1].data != "[DONE]" {
		t.Fatalf("the stream does not end with data: [DONE]: %v", events)
	}
	var content strings.Builder
	chunks := 0
	for _, e := range events[:len(events)-1] {
		var c struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(e.data), &c); err != nil {
			t.Fatalf("event %q is not JSON: %v", e.data, err)
		}
		if c.Object != "chat.completion.chunk" {
			t.Errorf("event object %q, want chat.completion.chunk", c.Object)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != "" {
				chunks++
				content.WriteString(ch.Delta.Content)
			}
		}
	}
	if chunks != tokens {
		t.Errorf("%d content chunks, want one per token (%d)", chunks, tokens)
	}
	// Paced at 20 tokens a second, the events must be spread out as they
	// came, not delivered together at the end.
	if spread := events[len(events)-1].at.Sub(events[0].at); spread < 200*time.Millisecond {
		t.Errorf("the events arrived within %s, want them spread over about half a second", spread)
	}

	rep := g.do(t, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat")})
	var whole struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(rep.Body, &whole); err != nil || len(whole.Choices) != 1 {
		t.Fatalf("non-streamed answer %s: %v", rep.Body, err)
	}
	if content.String() != whole.Choices[0].Message.Content {
		t.Errorf("streamed content %q, non-streamed %q: want the same", content.String(), whole.Choices[0].Message.Content)
	}
	waitFor(t, 2*time.Second, "in flight to drop to 0", func() bool { return g.scope(t, "pm:up/chat").InFlight == 0 })
}

// TestEndpoints: chat, embeddings, images and speech each come back in the
// mock provider's (OpenAI's) shape through the gateway.
func TestEndpoints(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{})
	g := startGateway(t, "", allKinds(up.URL))
	_, key := g.createKey(t)

	t.Run("chat", func(t *testing.T) {
		rep := g.do(t, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat")})
		var v struct {
			Object  string `json:"object"`
			Model   string `json:"model"`
			Choices []struct {
				Message struct {
					Role    string `json:"role"`
					Content string `json:"content"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage struct {
				TotalTokens int `json:"total_tokens"`
			} `json:"usage"`
		}
		decodeOK(t, rep, &v)
		if v.Object != "chat.completion" || v.Model != "gpt-4o-mini" || len(v.Choices) != 1 ||
			v.Choices[0].Message.Role != "assistant" || v.Choices[0].Message.Content == "" || v.Usage.TotalTokens == 0 {
			t.Errorf("chat answer %s", rep.Body)
		}
	})
	t.Run("embeddings", func(t *testing.T) {
		rep := g.do(t, request{Path: "/v1/embeddings", Key: key, Body: `{"model":"emb","input":["hello","world"]}`})
		var v struct {
			Object string `json:"object"`
			Data   []struct {
				Object    string    `json:"object"`
				Index     int       `json:"index"`
				Embedding []float64 `json:"embedding"`
			} `json:"data"`
		}
		decodeOK(t, rep, &v)
		if v.Object != "list" || len(v.Data) != 2 || v.Data[1].Index != 1 || v.Data[0].Object != "embedding" || len(v.Data[0].Embedding) != 1536 {
			t.Errorf("embeddings answer: object %q, %d items", v.Object, len(v.Data))
		}
	})
	t.Run("images", func(t *testing.T) {
		rep := g.do(t, request{Path: "/v1/images/generations", Key: key, Body: `{"model":"img","prompt":"a weir on a river"}`})
		var v struct {
			Data []struct {
				B64JSON string `json:"b64_json"`
			} `json:"data"`
		}
		decodeOK(t, rep, &v)
		if len(v.Data) != 1 {
			t.Fatalf("images answer %s", rep.Body)
		}
		png, err := base64.StdEncoding.DecodeString(v.Data[0].B64JSON)
		if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("b64_json is not a PNG (%v)", err)
		}
	})
	t.Run("speech", func(t *testing.T) {
		rep := g.do(t, request{Path: "/v1/audio/speech", Key: key, Body: `{"model":"tts","input":"Hello there","voice":"alloy"}`})
		if rep.Status != http.StatusOK {
			t.Fatalf("status %d: %s", rep.Status, rep.Body)
		}
		if ct := rep.Header.Get("Content-Type"); ct != "audio/mpeg" {
			t.Errorf("Content-Type %q, want audio/mpeg", ct)
		}
		if !bytes.HasPrefix(rep.Body, []byte{0xFF, 0xFB}) {
			t.Errorf("the body (%d bytes) does not start with an MP3 frame", len(rep.Body))
		}
	})
	if st := up.Mock.Stats(); st.ByStatus[http.StatusOK] != 4 {
		t.Errorf("the mock answered %v, want four 200s", st.ByStatus)
	}
}

func decodeOK(t *testing.T, rep *reply, v any) {
	t.Helper()
	if rep.Status != http.StatusOK {
		t.Fatalf("status %d: %s", rep.Status, rep.Body)
	}
	if ct := rep.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if err := json.Unmarshal(rep.Body, v); err != nil {
		t.Fatalf("answer is not the expected JSON: %v: %s", err, rep.Body)
	}
}

// TestModelsListsAllowedModels: GET /v1/models lists the models the key
// may use, and only those.
func TestModelsListsAllowedModels(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{})
	g := startGateway(t, "", allKinds(up.URL))
	_, all := g.createKey(t)
	_, some := g.createKey(t, "--models", "emb,chat")

	list := func(key string) []string {
		rep := g.do(t, request{Method: http.MethodGet, Path: "/v1/models", Key: key})
		var v struct {
			Object string `json:"object"`
			Data   []struct {
				ID     string `json:"id"`
				Object string `json:"object"`
			} `json:"data"`
		}
		decodeOK(t, rep, &v)
		if v.Object != "list" {
			t.Errorf("object %q, want list", v.Object)
		}
		var ids []string
		for _, m := range v.Data {
			if m.Object != "model" {
				t.Errorf("%s: object %q, want model", m.ID, m.Object)
			}
			ids = append(ids, m.ID)
		}
		slices.Sort(ids)
		return ids
	}
	if got, want := list(all), []string{"chat", "emb", "img", "tts"}; !slices.Equal(got, want) {
		t.Errorf("a key without an allow-list sees %v, want %v", got, want)
	}
	if got, want := list(some), []string{"chat", "emb"}; !slices.Equal(got, want) {
		t.Errorf("a key allowed chat and emb sees %v, want %v", got, want)
	}
	checkError(t, g.do(t, request{Method: http.MethodGet, Path: "/v1/models/img", Key: some}), http.StatusNotFound, "not_found")
	if rep := g.do(t, request{Method: http.MethodGet, Path: "/v1/models/chat", Key: some}); rep.Status != http.StatusOK {
		t.Errorf("GET /v1/models/chat: status %d", rep.Status)
	}
	checkError(t, g.do(t, request{Method: http.MethodGet, Path: "/v1/models"}), http.StatusUnauthorized, "unauthorized")
}

// TestPriorityHeaderOnlyLowers: X-Weir-Priority lowers a request's
// priority below its group's, and never raises it.
func TestPriorityHeaderOnlyLowers(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{})
	up.hold.Store(true)
	g := startGateway(t, "", oneModel(up.URL, "    concurrency: 1"))
	_, key := g.createKey(t)

	ctx := context.Background()
	send := func(agent, prio string) <-chan sent {
		r := request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat"), Agent: agent}
		if prio != "" {
			r.Header = map[string]string{"X-Weir-Priority": prio}
		}
		return g.sendAsync(ctx, r)
	}
	answers := []<-chan sent{send("running", "")}
	waitFor(t, 5*time.Second, "the first request to reach the upstream", func() bool { return len(up.Arrivals()) == 1 })
	// Queued in this order: lowered, plain, "raised" (which must stay at
	// the group's priority, behind the plain one that came first).
	for i, r := range [][2]string{{"lowered", "-5"}, {"plain", ""}, {"raised", "5"}} {
		answers = append(answers, send(r[0], r[1]))
		waitFor(t, 5*time.Second, r[0]+" to queue", func() bool { return g.scope(t, "pm:up/chat").Waiting == i+1 })
	}
	for i := range 4 {
		up.release(t)
		if i < 3 {
			waitFor(t, 5*time.Second, "the next admission", func() bool { return len(up.Arrivals()) == i+2 })
		}
	}
	for _, ch := range answers {
		if rep := await(t, ch); rep.Status != http.StatusOK {
			t.Errorf("status %d: %s", rep.Status, rep.Body)
		}
	}
	if got, want := up.Arrivals(), []string{"running", "plain", "raised", "lowered"}; !slices.Equal(got, want) {
		t.Errorf("admitted in the order %v, want %v", got, want)
	}
}

// TestMetricsAndHealth: /metrics shows admission events, queue waits and
// per-scope in-flight gauges that follow the requests; /healthz and
// /readyz answer.
func TestMetricsAndHealth(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{})
	up.hold.Store(true)
	g := startGateway(t, "", oneModel(up.URL, "    concurrency: 2"))
	_, key := g.createKey(t)

	for _, path := range []string{"/healthz", "/readyz"} {
		if rep := g.do(t, request{Method: http.MethodGet, Path: path}); rep.Status != http.StatusOK || len(bytes.TrimSpace(rep.Body)) == 0 {
			t.Errorf("GET %s: status %d, body %q", path, rep.Status, rep.Body)
		}
	}
	scrape := func() string {
		rep := g.do(t, request{Method: http.MethodGet, Path: "/metrics"})
		if rep.Status != http.StatusOK {
			t.Fatalf("GET /metrics: status %d", rep.Status)
		}
		return string(rep.Body)
	}
	inFlight := func(text string) float64 {
		v, ok := metric(text, "weir_scope_in_flight", `scope="pm:up/chat"`)
		if !ok {
			t.Fatalf("no weir_scope_in_flight for pm:up/chat in /metrics:\n%s", text)
		}
		return v
	}

	running := g.sendAsync(context.Background(), request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat")})
	waitFor(t, 5*time.Second, "the request to reach the upstream", func() bool { return len(up.Arrivals()) == 1 })
	text := scrape()
	if v := inFlight(text); v != 1 {
		t.Errorf("weir_scope_in_flight{scope=\"pm:up/chat\"} %v while a request runs, want 1", v)
	}
	if v, ok := metric(text, "weir_admission_events_total", `outcome="admitted"`); !ok || v < 1 {
		t.Errorf("weir_admission_events_total{outcome=\"admitted\"} %v (found %v), want at least 1", v, ok)
	}

	up.release(t)
	if rep := await(t, running); rep.Status != http.StatusOK {
		t.Fatalf("status %d: %s", rep.Status, rep.Body)
	}
	waitFor(t, 2*time.Second, "weir_scope_in_flight to drop to 0", func() bool { return inFlight(scrape()) == 0 })
	text = scrape()
	if v, ok := metric(text, "weir_queue_wait_seconds_count", `model="chat"`); !ok || v != 1 {
		t.Errorf("weir_queue_wait_seconds_count{model=\"chat\"} %v (found %v), want 1", v, ok)
	}
	if _, ok := metric(text, "weir_queue_wait_seconds_bucket", `model="chat"`, `le="0.005"`); !ok {
		t.Errorf("no weir_queue_wait_seconds histogram buckets")
	}
	if v, ok := metric(text, "weir_admission_events_total", `outcome="released"`); !ok || v < 1 {
		t.Errorf("weir_admission_events_total{outcome=\"released\"} %v (found %v), want at least 1", v, ok)
	}
}
