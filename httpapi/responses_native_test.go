package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/provider/mock"
)

// exchange is one call the mock received and what it answered.
type exchange struct {
	method, path string
	header       http.Header
	body, answer []byte
	status       int
}

// tap records every call that reaches the mock, its body and its answer.
type tap struct {
	mu  sync.Mutex
	all []exchange
	// refuse, if set, answers a call to a path it returns a status for
	// instead of the mock.
	refuse func(r *http.Request) int
}

type tapWriter struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
}

func (w *tapWriter) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }
func (w *tapWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	return w.ResponseWriter.Write(p)
}
func (w *tapWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (tp *tap) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		tw := &tapWriter{ResponseWriter: w, status: http.StatusOK}
		if tp.refuse != nil {
			if st := tp.refuse(r); st != 0 {
				tw.Header().Set("Content-Type", "application/json")
				tw.WriteHeader(st)
				_, _ = tw.Write([]byte(`{"error":{"message":"refused by the test","type":"server_error","param":null,"code":null}}`))
			}
		}
		if tw.buf.Len() == 0 {
			h.ServeHTTP(tw, r)
		}
		tp.mu.Lock()
		tp.all = append(tp.all, exchange{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: b, answer: tw.buf.Bytes(), status: tw.status})
		tp.mu.Unlock()
	})
}

// to are the calls to path, in order.
func (tp *tap) to(path string) []exchange {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var out []exchange
	for _, e := range tp.all {
		if e.path == path {
			out = append(out, e)
		}
	}
	return out
}

// last is the last call to path.
func (tp *tap) last(t *testing.T, path string) exchange {
	t.Helper()
	all := tp.to(path)
	if len(all) == 0 {
		t.Fatalf("the mock received no call to %s", path)
	}
	return all[len(all)-1]
}

func readAllBody(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A Responses request whose candidate is on an openai platform goes to
// the platform's /responses as the client sent it, the model its
// upstream name, and the answer, whole or streamed, comes back as the
// upstream gave it; its usage is settled and recorded from the Responses
// shapes.
func TestResponsesPassedThrough(t *testing.T) {
	t.Parallel()
	var tp tap
	var usage usageLog
	b := setup(t, setupOpts{upstream: tp.wrap, mock: mock.Config{CompletionTokens: 7},
		deps: func(d *Deps) { d.Usage = usage.record }})

	t.Run("whole", func(t *testing.T) {
		body := `{"model":"m","instructions":"Be brief.","input":"Say hello","max_output_tokens":100,"metadata":{"k":"v"}}`
		resp := b.post(t, "/v1/responses", body, nil)
		got := readAllBody(t, resp)
		if resp.StatusCode != http.StatusOK || resp.Header.Get(HeaderQueueWait) == "" {
			t.Fatalf("status %d, headers %v: %s", resp.StatusCode, resp.Header, got)
		}
		ex := tp.last(t, "/v1/responses")
		if want := strings.Replace(body, `"m"`, `"gpt-4o-mini"`, 1); string(ex.body) != want {
			t.Errorf("the upstream received %s\nwant %s", ex.body, want)
		}
		if !bytes.Equal(got, ex.answer) {
			t.Errorf("the client got %s\nthe upstream answered %s", got, ex.answer)
		}
		if len(tp.to("/v1/chat/completions")) != 0 {
			t.Error("a chat completion was sent too")
		}
		var m map[string]any
		_ = json.Unmarshal(got, &m)
		u := usage.all[len(usage.all)-1]
		in := int64(m["usage"].(map[string]any)["input_tokens"].(float64))
		if u.Endpoint != "responses" || u.PromptTokens != in || u.CompletionTokens != 7 || u.Status != http.StatusOK || u.Outcome != string(gateway.OutcomeOK) {
			t.Errorf("usage record %+v; the answer's input tokens %d", u, in)
		}
	})

	t.Run("streamed", func(t *testing.T) {
		resp := b.post(t, "/v1/responses", `{"model":"m","input":"Say hello","stream":true}`, nil)
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("headers %v", resp.Header)
		}
		got := readAllBody(t, resp)
		ex := tp.last(t, "/v1/responses")
		if !bytes.Equal(got, ex.answer) {
			t.Errorf("the client got %s\nthe upstream answered %s", got, ex.answer)
		}
		evs := readEvents(t, bytes.NewReader(got))
		if evs[len(evs)-1].typ != "response.completed" || len(evs) != 15 {
			t.Errorf("events %v", types(evs))
		}
		u := usage.all[len(usage.all)-1]
		if u.CompletionTokens != 7 || u.PromptTokens == 0 || u.Outcome != string(gateway.OutcomeOK) {
			t.Errorf("usage record %+v", u)
		}
	})

	t.Run("forced tool", func(t *testing.T) {
		resp := b.post(t, "/v1/responses", `{"model":"m","input":"Weather in Paris?","tool_choice":"required",`+
			`"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]}`, nil)
		var m map[string]any
		if err := json.Unmarshal(readAllBody(t, resp), &m); err != nil {
			t.Fatal(err)
		}
		item := m["output"].([]any)[0].(map[string]any)
		if item["type"] != "function_call" || item["name"] != "get_weather" {
			t.Errorf("output %v", item)
		}
	})
}

// An azure platform is sent the request at its v1 API, the deployment as
// the body's model.
func TestResponsesPassedThroughAzure(t *testing.T) {
	t.Parallel()
	var tp tap
	cat := weir.Catalog{
		Platforms:      []weir.Platform{{Name: "az", Kind: "azure", BaseURL: "ROOT", APIKey: "azure-key"}},
		PlatformModels: []weir.PlatformModel{{Name: "az/m", Platform: "az", Upstream: "my-deployment"}},
		Models:         []weir.Model{{Name: "m", Kind: weir.KindChat, Candidates: []weir.Candidate{{PlatformModel: "az/m", Weight: 1}}}},
	}
	b := setup(t, setupOpts{upstream: tp.wrap, catalog: &cat})
	resp := b.post(t, "/v1/responses", `{"model":"m","input":"hi","stream":true}`, nil)
	got := readAllBody(t, resp)
	ex := tp.last(t, "/openai/v1/responses")
	if ex.header.Get("Api-Key") != "azure-key" || !strings.Contains(string(ex.body), `"model":"my-deployment"`) || !bytes.Equal(got, ex.answer) {
		t.Errorf("the upstream received %v %s; the client got %s", ex.header, ex.body, got)
	}
	if evs := readEvents(t, bytes.NewReader(got)); evs[len(evs)-1].typ != "response.completed" {
		t.Errorf("events %v", types(evs))
	}
}

// One request may fall back from a candidate that speaks the Responses
// API to one that does not: the body and the path follow the admitted
// candidate, and the answer writer translates what the second sends.
func TestResponsesFallBackToTranslation(t *testing.T) {
	t.Parallel()
	tp := tap{refuse: func(r *http.Request) int {
		if r.URL.Path == "/v1/responses" {
			return http.StatusServiceUnavailable
		}
		return 0
	}}
	cat := weir.Catalog{
		Platforms: []weir.Platform{{Name: "native", Kind: "openai", BaseURL: "UP"},
			{Name: "claude", Kind: "anthropic", BaseURL: "UP"}},
		PlatformModels: []weir.PlatformModel{{Name: "native/m", Platform: "native", Upstream: "gpt-4o-mini"},
			{Name: "claude/m", Platform: "claude", Upstream: "claude-test"}},
		Models: []weir.Model{{Name: "m", Kind: weir.KindChat, Candidates: []weir.Candidate{
			{PlatformModel: "native/m", Priority: 2, Weight: 1}, {PlatformModel: "claude/m", Priority: 1, Weight: 1}}}},
	}
	for _, stream := range []bool{false, true} {
		b := setup(t, setupOpts{upstream: tp.wrap, catalog: &cat})
		body := `{"model":"m","input":"hi"}`
		if stream {
			body = `{"model":"m","input":"hi","stream":true}`
		}
		resp := b.post(t, "/v1/responses", body, nil)
		got := readAllBody(t, resp)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %v: status %d: %s", stream, resp.StatusCode, got)
		}
		if len(tp.to("/v1/responses")) == 0 || len(tp.to("/v1/messages")) == 0 {
			t.Fatalf("stream %v: calls %v", stream, tp.all)
		}
		if !stream {
			r := decodeResponse(t, &http.Response{Body: io.NopCloser(bytes.NewReader(got))})
			if r.Store || r.Model != "claude-test" || len(r.Output) != 1 || r.Output[0].Content[0].Text == "" {
				t.Errorf("the translated response %+v", r)
			}
			continue
		}
		evs := readEvents(t, bytes.NewReader(got))
		final := evs[len(evs)-1]
		if final.typ != "response.completed" || final.data["response"].(map[string]any)["store"] != false {
			t.Errorf("events %v, last %v", types(evs), final.data)
		}
	}
}

// A passed-through stream that the upstream breaks off ends with the
// Responses API's error event, numbered after the last that got through.
func TestResponsesPassedThroughStreamFails(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	var usage usageLog
	b := setup(t, setupOpts{
		clock: clk,
		gwCfg: gateway.Config{UpstreamIdleTimeout: 10 * time.Second},
		mock:  mock.Config{StallRate: 1, StallFor: time.Hour, CompletionTokens: 10},
		deps:  func(d *Deps) { d.Usage = usage.record },
	})
	var evs []sseEvent
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.http.URL+"/v1/responses", strings.NewReader(`{"model":"m","input":"hi","stream":true}`))
		if err != nil {
			return
		}
		req.Header.Set("Authorization", "Bearer "+b.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		evs = readEvents(t, resp.Body)
	}()
	advanceUntil(t, clk, 5*time.Second, time.Minute, done)
	if len(evs) < 2 {
		t.Fatalf("events %v", types(evs))
	}
	last := evs[len(evs)-1]
	if last.typ != "error" || last.data["code"] != string(weir.CodeUpstreamTimeout) || evs[len(evs)-2].typ != "response.output_text.delta" {
		t.Fatalf("events %v; last %v", types(evs), last.data)
	}
	if got := usage.outcomes(); len(got) != 1 || got[0] != string(weir.CodeUpstreamTimeout) {
		t.Errorf("outcomes %v", got)
	}
}
