package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
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
	method, path, query string
	header              http.Header
	body, answer        []byte
	status              int
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
		tp.all = append(tp.all, exchange{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, header: r.Header.Clone(), body: b, answer: tw.buf.Bytes(), status: tw.status})
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
		u := usage.last(t, 1)
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
		u := usage.last(t, 2)
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
	evs := streamStalled(t, b, clk)
	if len(evs) < 2 {
		t.Fatalf("events %v", types(evs))
	}
	last := evs[len(evs)-1]
	if last.typ != "error" || last.data["code"] != string(weir.CodeUpstreamTimeout) || evs[len(evs)-2].typ != "response.output_text.delta" {
		t.Fatalf("events %v; last %v", types(evs), last.data)
	}
	if got := usage.outcomes(t, 1); len(got) != 1 || got[0] != string(weir.CodeUpstreamTimeout) {
		t.Errorf("outcomes %v", got)
	}
}

// sendAs sends body (none if "") to path with method and key's secret.
func (b *testBundle) sendAs(t *testing.T, method, path, key, body string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, b.http.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp, readAllBody(t, resp)
}

// statefulBundle serves, beside the bundle's mock (platforms "a", kind
// openai, and "c", kind anthropic), a second mock as platform "b" (kind
// openai): each mock keeps its own responses. Models: "m" (a/m first,
// then b/m), "ma" (a/m), "mb" (b/m), "mc" (c/m), "mx" (c/m first, then
// a/m).
func statefulBundle(t *testing.T) (b *testBundle, tapA, tapB *tap) {
	t.Helper()
	tapA, tapB = &tap{}, &tap{}
	second := httptest.NewServer(tapB.wrap(mock.New(mock.Config{CompletionTokens: 5})))
	t.Cleanup(second.Close)
	model := func(name string, pms ...string) weir.Model {
		m := weir.Model{Name: name, Kind: weir.KindChat}
		for i, pm := range pms {
			m.Candidates = append(m.Candidates, weir.Candidate{PlatformModel: pm, Priority: len(pms) - i, Weight: 1})
		}
		return m
	}
	cat := weir.Catalog{
		Platforms: []weir.Platform{{Name: "a", Kind: "openai", BaseURL: "UP"}, {Name: "b", Kind: "openai", BaseURL: second.URL + "/v1"},
			{Name: "c", Kind: "anthropic", BaseURL: "UP"}},
		PlatformModels: []weir.PlatformModel{{Name: "a/m", Platform: "a", Upstream: "gpt-a"}, {Name: "b/m", Platform: "b", Upstream: "gpt-b"},
			{Name: "c/m", Platform: "c", Upstream: "claude-c"}},
		Models: []weir.Model{model("m", "a/m", "b/m"), model("ma", "a/m"), model("mb", "b/m"), model("mc", "c/m"), model("mx", "c/m", "a/m")},
	}
	return setup(t, setupOpts{upstream: tapA.wrap, catalog: &cat, mock: mock.Config{CompletionTokens: 5}}), tapA, tapB
}

// What no translation carries is served by a candidate that takes the
// Responses API as it is, the others left out; a model with none refuses
// it, naming the parameter.
func TestResponsesUntranslatableGoNative(t *testing.T) {
	t.Parallel()
	b, tapA, _ := statefulBundle(t)
	for _, body := range []string{
		`{"model":"mx","input":"hi","tools":[{"type":"web_search"}]}`,
		`{"model":"mx","input":[{"type":"reasoning","id":"rs_1","summary":[]},{"role":"user","content":"hi"}]}`,
		`{"model":"mx","input":"hi","store":true,"stream":true}`,
	} {
		resp, got := b.sendAs(t, http.MethodPost, "/v1/responses", b.key, body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d: %s", body, resp.StatusCode, got)
		}
		if ex := tapA.last(t, "/v1/responses"); !bytes.Equal(ex.answer, got) || !strings.Contains(string(ex.body), `"model":"gpt-a"`) {
			t.Errorf("%s: the upstream received %s", body, ex.body)
		}
	}
	if n := len(tapA.to("/v1/messages")); n != 0 {
		t.Errorf("the anthropic candidate, first in order, was sent %d requests", n)
	}
	resp, got := b.sendAs(t, http.MethodPost, "/v1/responses", b.key, `{"model":"mc","input":"hi","tools":[{"type":"web_search"}]}`)
	e := apiErrorOf(t, &http.Response{Body: io.NopCloser(bytes.NewReader(got))})
	if resp.StatusCode != http.StatusBadRequest || e.Code != string(weir.CodeNoCandidate) || e.Param == nil || *e.Param != "tools[0].type" {
		t.Errorf("a model without a native candidate: %d %s", resp.StatusCode, got)
	}
}

// A response a platform keeps binds to it, in the store, for the key
// that made it: a request continuing it goes to that platform alone (a
// model with no candidate there refuses it), and retrieving, listing,
// cancelling and deleting it pass to that platform for that key only.
func TestResponsesBoundToTheirPlatform(t *testing.T) {
	t.Parallel()
	b, tapA, tapB := statefulBundle(t)
	other := b.newKey(t, weir.APIKey{})
	idOf := func(body []byte) string {
		var r struct{ ID string }
		if err := json.Unmarshal(body, &r); err != nil || r.ID == "" {
			t.Fatalf("no response id in %s", body)
		}
		return r.ID
	}

	// Made on b (whole, and streamed), bound there.
	resp, got := b.sendAs(t, http.MethodPost, "/v1/responses", b.key, `{"model":"mb","input":"hi"}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, got)
	}
	id := idOf(got)
	bd, err := b.db.ResponseBindingGet(t.Context(), &weir.ResponseBindingGetParams{ResponseID: id, Now: time.Now()})
	if err != nil || bd.Platform != "b" || !strings.HasPrefix(bd.KeyID, "key_") || bd.ExpiresAt.Sub(bd.CreatedAt) != weir.ResponseBindingTTL {
		t.Fatalf("binding %+v, %v", bd, err)
	}
	_, got = b.sendAs(t, http.MethodPost, "/v1/responses", b.key, `{"model":"mb","input":"hi","stream":true}`)
	evs := readEvents(t, bytes.NewReader(got))
	streamed := evs[0].data["response"].(map[string]any)["id"].(string)
	if _, err := b.db.ResponseBindingGet(t.Context(), &weir.ResponseBindingGetParams{ResponseID: streamed, Now: time.Now()}); err != nil {
		t.Errorf("the streamed response is not bound: %v", err)
	}
	// store: false keeps nothing, so nothing is bound.
	_, got = b.sendAs(t, http.MethodPost, "/v1/responses", b.key, `{"model":"mb","input":"hi","store":false}`)
	if _, err := b.db.ResponseBindingGet(t.Context(), &weir.ResponseBindingGetParams{ResponseID: idOf(got), Now: time.Now()}); err == nil {
		t.Error("a response not stored is bound")
	}

	// Continued through "m", whose first candidate is on a: it goes to b.
	resp, got = b.sendAs(t, http.MethodPost, "/v1/responses", b.key, `{"model":"m","input":"and then?","previous_response_id":"`+id+`"}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("continued: %d %s", resp.StatusCode, got)
	}
	if n := len(tapA.to("/v1/responses")); n != 0 {
		t.Errorf("platform a was sent %d requests", n)
	}
	if ex := tapB.last(t, "/v1/responses"); !strings.Contains(string(ex.body), id) || !bytes.Equal(ex.answer, got) {
		t.Errorf("platform b received %s", ex.body)
	}
	// Through "ma", which has no candidate on b: refused.
	resp, got = b.sendAs(t, http.MethodPost, "/v1/responses", b.key, `{"model":"ma","input":"and then?","previous_response_id":"`+id+`"}`)
	e := apiErrorOf(t, &http.Response{Body: io.NopCloser(bytes.NewReader(got))})
	if resp.StatusCode != http.StatusBadRequest || e.Code != string(weir.CodeNoCandidate) || e.Param == nil || *e.Param != "previous_response_id" {
		t.Errorf("continued through a model without b: %d %s", resp.StatusCode, got)
	}
	// Another key's: not found, and sent nowhere.
	before := len(tapB.to("/v1/responses"))
	resp, got = b.sendAs(t, http.MethodPost, "/v1/responses", other, `{"model":"m","input":"and then?","previous_response_id":"`+id+`"}`)
	e = apiErrorOf(t, &http.Response{Body: io.NopCloser(bytes.NewReader(got))})
	if resp.StatusCode != http.StatusNotFound || e.Param == nil || *e.Param != "previous_response_id" ||
		len(tapB.to("/v1/responses")) != before || len(tapA.to("/v1/responses")) != 0 {
		t.Errorf("another key's continuation: %d %s", resp.StatusCode, got)
	}

	// Retrieved, listed, cancelled and deleted on b, for this key only.
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/v1/responses/" + id, http.StatusOK},
		{http.MethodGet, "/v1/responses/" + id + "/input_items?limit=10", http.StatusOK},
		{http.MethodPost, "/v1/responses/" + id + "/cancel", http.StatusBadRequest}, // the platform's own refusal
	} {
		resp, got := b.sendAs(t, tc.method, tc.path, b.key, "")
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: %d %s", tc.method, tc.path, resp.StatusCode, got)
		}
		path, _, _ := strings.Cut(tc.path, "?")
		if ex := tapB.last(t, path); ex.method != tc.method || !bytes.Equal(ex.answer, got) {
			t.Errorf("%s %s: b received %s %s; the client got %s", tc.method, tc.path, ex.method, ex.path, got)
		}
		resp, got = b.sendAs(t, tc.method, tc.path, other, "")
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s with another key: %d %s", tc.method, tc.path, resp.StatusCode, got)
		}
	}
	if ex := tapB.last(t, "/v1/responses/"+id+"/input_items"); ex.query != "limit=10" {
		t.Errorf("input_items sent with the query %q", ex.query)
	}
	if resp, got := b.sendAs(t, http.MethodDelete, "/v1/responses/"+id, other, ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("DELETE with another key: %d %s", resp.StatusCode, got)
	}
	resp, got = b.sendAs(t, http.MethodDelete, "/v1/responses/"+id, b.key, "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(got), `"deleted":true`) {
		t.Fatalf("DELETE: %d %s", resp.StatusCode, got)
	}
	if _, err := b.db.ResponseBindingGet(t.Context(), &weir.ResponseBindingGetParams{ResponseID: id, Now: time.Now()}); !errors.Is(err, weir.ErrNotFound) {
		t.Errorf("the deleted response is still bound: %v", err)
	}
	if resp, got := b.sendAs(t, http.MethodGet, "/v1/responses/"+id, b.key, ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET after DELETE: %d %s", resp.StatusCode, got)
	}
}
