package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/dialect/responses"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/provider/mock"
)

// upstreamBodies records the chat completion bodies the mock received.
type upstreamBodies struct {
	mu     sync.Mutex
	bodies []map[string]any
}

func (u *upstreamBodies) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" {
			b, _ := io.ReadAll(r.Body)
			var m map[string]any
			_ = json.Unmarshal(b, &m)
			u.mu.Lock()
			u.bodies = append(u.bodies, m)
			u.mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		h.ServeHTTP(w, r)
	})
}

func (u *upstreamBodies) last(t *testing.T) map[string]any {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.bodies) == 0 {
		t.Fatal("the upstream received no chat completion")
	}
	return u.bodies[len(u.bodies)-1]
}

// sseEvent is one event of a Responses stream.
type sseEvent struct {
	typ  string
	data map[string]any
}

// readEvents reads a Responses stream to its end, checking that each
// event's name is its data's type and that no [DONE] comes.
func readEvents(t *testing.T, body io.Reader) []sseEvent {
	t.Helper()
	raw, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("[DONE]")) {
		t.Errorf("a Responses stream holds [DONE]:\n%s", raw)
	}
	var evs []sseEvent
	for _, block := range strings.Split(strings.TrimSpace(string(raw)), "\n\n") {
		name, data, ok := strings.Cut(block, "\ndata: ")
		if !ok || !strings.HasPrefix(name, "event: ") {
			t.Fatalf("not an event: %q", block)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("event data: %v", err)
		}
		if typ := strings.TrimPrefix(name, "event: "); m["type"] != typ {
			t.Errorf("event %s has data of type %v", typ, m["type"])
		}
		if m["sequence_number"] != float64(len(evs)) {
			t.Errorf("event %d has sequence_number %v", len(evs), m["sequence_number"])
		}
		evs = append(evs, sseEvent{m["type"].(string), m})
	}
	return evs
}

func decodeResponse(t *testing.T, resp *http.Response) responses.Response {
	t.Helper()
	var out responses.Response
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// A Responses request goes through the gateway as a chat completion and
// its answer comes back as a response object; a stream comes back as the
// Responses API's events, and the usage is settled and recorded as a
// chat completion's.
func TestResponsesThroughTheGateway(t *testing.T) {
	t.Parallel()
	var up upstreamBodies
	var usage usageLog
	b := setup(t, setupOpts{
		translateResponses: true,
		upstream:           up.wrap,
		mock:               mock.Config{CompletionTokens: 7},
		deps:               func(d *Deps) { d.Usage = usage.record },
	})

	t.Run("whole", func(t *testing.T) {
		resp := b.post(t, "/v1/responses", `{"model":"m","instructions":"Be brief.","input":"Say hello","max_output_tokens":100,"metadata":{"k":"v"}}`, nil)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || resp.Header.Get(HeaderQueueWait) == "" {
			t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
		}
		r := decodeResponse(t, resp)
		if !strings.HasPrefix(r.ID, "resp_") || r.Object != "response" || r.Status != responses.StatusCompleted || r.Store || r.Metadata["k"] != "v" ||
			r.Model != "gpt-4o-mini" || r.Instructions == nil || *r.Instructions != "Be brief." {
			t.Errorf("response %+v", r)
		}
		if len(r.Output) != 1 || r.Output[0].Type != responses.ItemMessage || len(r.Output[0].Content) != 1 || r.Output[0].Content[0].Text == "" ||
			!strings.HasPrefix(r.Output[0].ID, "msg_") {
			t.Fatalf("output %+v", r.Output)
		}
		if r.Usage == nil || r.Usage.OutputTokens != 7 || r.Usage.InputTokens == 0 || r.Usage.TotalTokens != r.Usage.InputTokens+7 {
			t.Errorf("usage %+v", r.Usage)
		}
		sent := up.last(t)
		msgs := sent["messages"].([]any)
		if sent["model"] != "gpt-4o-mini" || sent["max_completion_tokens"] != 100.0 || len(msgs) != 2 ||
			msgs[0].(map[string]any)["role"] != "system" || msgs[1].(map[string]any)["content"] != "Say hello" || sent["metadata"] != nil {
			t.Errorf("the upstream received %v", sent)
		}
		u := usage.last(t, 1)
		if u.Endpoint != "responses" || u.Model != "m" || u.CompletionTokens != 7 || u.PromptTokens != r.Usage.InputTokens || u.Status != http.StatusOK {
			t.Errorf("usage record %+v", u)
		}
	})

	t.Run("streamed", func(t *testing.T) {
		resp := b.post(t, "/v1/responses", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"Say hello"}]}],"stream":true}`, nil)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
		}
		evs := readEvents(t, resp.Body)
		var got []string
		var text string
		for _, e := range evs {
			if !slices.Contains(got, e.typ) {
				got = append(got, e.typ)
			}
			if e.typ == responses.EventOutputTextDelta {
				text += e.data["delta"].(string)
			}
		}
		want := []string{responses.EventCreated, responses.EventInProgress, responses.EventOutputItemAdded, responses.EventContentPartAdded,
			responses.EventOutputTextDelta, responses.EventOutputTextDone, responses.EventContentPartDone, responses.EventOutputItemDone, responses.EventCompleted}
		if !slices.Equal(got, want) {
			t.Fatalf("events %v\nwant %v", got, want)
		}
		if n := strings.Count(strings.Join(types(evs), " "), responses.EventOutputTextDelta); n != 7 {
			t.Errorf("%d text deltas, want one per streamed token (7)", n)
		}
		final := evs[len(evs)-1].data["response"].(map[string]any)
		out := final["output"].([]any)[0].(map[string]any)
		if out["content"].([]any)[0].(map[string]any)["text"] != text || text == "" {
			t.Errorf("final text %v, deltas %q", out, text)
		}
		if u := final["usage"].(map[string]any); u["output_tokens"] != 7.0 || final["store"] != false {
			t.Errorf("final response %v", final)
		}
		sent := up.last(t)
		if sent["stream"] != true || sent["stream_options"].(map[string]any)["include_usage"] != true {
			t.Errorf("the upstream received %v", sent)
		}
		u := usage.last(t, 2)
		if u.Endpoint != "responses" || u.CompletionTokens != 7 || u.Outcome != string(gateway.OutcomeOK) {
			t.Errorf("usage record %+v", u)
		}
	})
}

func types(evs []sseEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.typ)
	}
	return out
}

// A function tool round trip, whole and streamed: the model's call comes
// out as a function_call item, and goes back in with its
// function_call_output as the chat completion's tool call and tool
// message, under the same call id.
func TestResponsesFunctionToolRoundTrip(t *testing.T) {
	t.Parallel()
	var up upstreamBodies
	b := setup(t, setupOpts{upstream: up.wrap, translateResponses: true})
	const tools = `"tools":[{"type":"function","name":"get_weather","description":"The weather in a city",
		"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false},"strict":true}]`
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole", true: "streamed"}[stream], func(t *testing.T) {
			first := `{"model":"m","input":"Weather in Paris?",` + tools + `,"tool_choice":{"type":"function","name":"get_weather"},"stream":` + map[bool]string{false: "false", true: "true"}[stream] + `}`
			resp := b.post(t, "/v1/responses", first, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			var call responses.OutputItem
			if stream {
				evs := readEvents(t, resp.Body)
				want := []string{responses.EventCreated, responses.EventInProgress, responses.EventOutputItemAdded, responses.EventArgumentsDelta}
				if got := types(evs); len(got) < 7 || !slices.Equal(got[:4], want) || got[len(got)-1] != responses.EventCompleted ||
					got[len(got)-3] != responses.EventArgumentsDone || got[len(got)-2] != responses.EventOutputItemDone {
					t.Fatalf("events %v", got)
				}
				b, _ := json.Marshal(evs[len(evs)-2].data["item"])
				if err := json.Unmarshal(b, &call); err != nil {
					t.Fatal(err)
				}
			} else {
				r := decodeResponse(t, resp)
				if len(r.Output) != 1 {
					t.Fatalf("output %+v", r.Output)
				}
				call = r.Output[0]
			}
			var args struct {
				City string `json:"city"`
			}
			if call.Type != responses.ItemFunctionCall || call.Name != "get_weather" || !strings.HasPrefix(call.CallID, "call_") ||
				!strings.HasPrefix(call.ID, "fc_") || call.Status != responses.StatusCompleted || json.Unmarshal([]byte(call.Arguments), &args) != nil {
				t.Fatalf("function call %+v", call)
			}
			sent := up.last(t)
			if tool := sent["tools"].([]any)[0].(map[string]any); tool["type"] != "function" || tool["function"].(map[string]any)["name"] != "get_weather" ||
				sent["tool_choice"].(map[string]any)["function"].(map[string]any)["name"] != "get_weather" {
				t.Errorf("the upstream received %v", sent)
			}

			// The client sends the call back with its output, as the SDKs
			// do: the output items as they came, then the output.
			item, _ := json.Marshal(call)
			second := `{"model":"m",` + tools + `,"input":[{"role":"user","content":"Weather in Paris?"},` + string(item) +
				`,{"type":"function_call_output","call_id":"` + call.CallID + `","output":"{\"celsius\":21}"}]}`
			resp = b.post(t, "/v1/responses", second, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if r := decodeResponse(t, resp); len(r.Output) != 1 || r.Output[0].Type != responses.ItemMessage {
				t.Errorf("answer to the call's output: %+v", r.Output)
			}
			msgs := up.last(t)["messages"].([]any)
			if len(msgs) != 3 {
				t.Fatalf("the upstream received messages %v", msgs)
			}
			asked := msgs[1].(map[string]any)
			tc := asked["tool_calls"].([]any)[0].(map[string]any)
			fn := tc["function"].(map[string]any)
			if asked["role"] != "assistant" || tc["id"] != call.CallID || fn["name"] != "get_weather" || fn["arguments"] != call.Arguments {
				t.Errorf("the call went upstream as %v", asked)
			}
			if answered := msgs[2].(map[string]any); answered["role"] != "tool" || answered["tool_call_id"] != call.CallID || answered["content"] != `{"celsius":21}` {
				t.Errorf("the output went upstream as %v", answered)
			}
		})
	}
}

// What cannot be translated, for a model with no candidate that takes
// the Responses API as it is, is refused before anything is queued, in
// OpenAI's error shape naming the parameter: no_candidate as a 400 for
// what OpenAI's API would take, invalid_request for a malformed request.
func TestResponsesRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{translateResponses: true})
	for _, tc := range []struct {
		name, body, code, param string
	}{
		{"previous_response_id", `{"model":"m","input":"hi","previous_response_id":"resp_1"}`, "no_candidate", "previous_response_id"},
		{"store", `{"model":"m","input":"hi","store":true}`, "no_candidate", "store"},
		{"background", `{"model":"m","input":"hi","background":true}`, "no_candidate", "background"},
		{"conversation", `{"model":"m","input":"hi","conversation":"conv_1"}`, "no_candidate", "conversation"},
		{"web search", `{"model":"m","input":"hi","tools":[{"type":"web_search"}]}`, "no_candidate", "tools[0].type"},
		{"file search", `{"model":"m","input":"hi","tools":[{"type":"file_search","vector_store_ids":["vs_1"]}]}`, "no_candidate", "tools[0].type"},
		{"a reasoning item", `{"model":"m","input":[{"type":"reasoning","id":"rs_1","summary":[]}]}`, "no_candidate", "input[0]"},
		{"an unknown parameter", `{"model":"m","input":"hi","n":2}`, "invalid_request", "n"},
		{"no input", `{"model":"m"}`, "invalid_request", "input"},
		{"an unknown model", `{"model":"nope","input":"hi"}`, "not_found", "model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := b.post(t, "/v1/responses", tc.body, nil)
			e := apiErrorOf(t, resp)
			want := map[string]int{"no_candidate": 400, "invalid_request": 400, "not_found": 404}[tc.code]
			if resp.StatusCode != want || e.Code != tc.code || e.Param == nil || *e.Param != tc.param || e.Message == "" {
				t.Errorf("status %d, error %+v; want %d %s naming %s", resp.StatusCode, e, want, tc.code, tc.param)
			}
			if tc.code != "not_found" && e.Type != "invalid_request_error" {
				t.Errorf("type %q, want invalid_request_error", e.Type)
			}
		})
	}
	if n := b.mock.Stats().Requests; n != 0 {
		t.Errorf("the upstream received %d requests", n)
	}
}

// A response Weir did not bind (no platform that keeps responses made
// it through Weir): retrieving, deleting or cancelling it, or listing its
// input items, is a 404 that says so; without a key, a 401.
func TestResponsesNotStored(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/v1/responses/resp_1"},
		{http.MethodDelete, "/v1/responses/resp_1"},
		{http.MethodPost, "/v1/responses/resp_1/cancel"},
		{http.MethodGet, "/v1/responses/resp_1/input_items"},
	} {
		for _, key := range []string{b.key, ""} {
			req, err := http.NewRequestWithContext(t.Context(), tc.method, b.http.URL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if key != "" {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			e := apiErrorOf(t, resp)
			resp.Body.Close()
			switch {
			case key == "" && (resp.StatusCode != http.StatusUnauthorized || e.Code != string(weir.CodeUnauthorized)):
				t.Errorf("%s %s without a key: %d %+v", tc.method, tc.path, resp.StatusCode, e)
			case key != "" && (resp.StatusCode != http.StatusNotFound || e.Code != string(weir.CodeNotFound) ||
				!strings.Contains(e.Message, "key whose request made it") || !strings.Contains(e.Message, "resp_1")):
				t.Errorf("%s %s: %d %+v", tc.method, tc.path, resp.StatusCode, e)
			}
		}
	}
}

// The upstream's refusal of the request comes back as it came, in
// OpenAI's error shape.
func TestResponsesUpstreamRefusal(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{translateResponses: true, upstream: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Header.Set("X-Mock-Status", "400")
			h.ServeHTTP(w, r)
		})
	}})
	resp := b.post(t, "/v1/responses", `{"model":"m","input":"hi"}`, nil)
	if e := apiErrorOf(t, resp); resp.StatusCode != http.StatusBadRequest || e.Type != "invalid_request_error" || e.Message == "" {
		t.Errorf("status %d, error %+v", resp.StatusCode, e)
	}
	if n := b.mock.Stats().ByStatus[http.StatusBadRequest]; n != 1 {
		t.Errorf("the upstream refused %d requests, want 1", n)
	}
}

// A stream whose upstream stalls after sending half ends after the idle
// timeout with response.failed carrying Weir's code, the text so far in
// its incomplete message.
func TestResponsesStalledStreamFails(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	var usage usageLog
	b := setup(t, setupOpts{
		clock:              clk,
		gwCfg:              gateway.Config{UpstreamIdleTimeout: 10 * time.Second},
		mock:               mock.Config{StallRate: 1, StallFor: time.Hour, CompletionTokens: 10},
		deps:               func(d *Deps) { d.Usage = usage.record },
		translateResponses: true,
	})
	evs := streamStalled(t, b, clk)
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	last := evs[len(evs)-1]
	if last.typ != responses.EventFailed {
		t.Fatalf("events %v; want the last response.failed", types(evs))
	}
	r := last.data["response"].(map[string]any)
	e := r["error"].(map[string]any)
	out := r["output"].([]any)
	if r["status"] != "failed" || e["code"] != string(weir.CodeUpstreamTimeout) || len(out) != 1 || out[0].(map[string]any)["status"] != "incomplete" {
		t.Errorf("failed response %v", r)
	}
	if got := usage.outcomes(t, 1); len(got) != 1 || got[0] != string(weir.CodeUpstreamTimeout) {
		t.Errorf("outcomes %v", got)
	}
}

// streamStalled posts a streamed Responses request to b, whose upstream
// stalls, and returns its events, moving clk until the stream has ended.
func streamStalled(t *testing.T, b *testBundle, clk *clock.Fake) []sseEvent {
	t.Helper()
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
	return evs
}
