package mock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// signedHeader is what a SigV4-signed request carries.
var signedHeader = map[string]string{
	"Authorization": "AWS4-HMAC-SHA256 Credential=AKIDTEST/20260101/us-east-1/bedrock/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=abc123",
	"X-Amz-Date":    "20260101T000000Z",
}

func withHeader(extra map[string]string) map[string]string {
	h := map[string]string{}
	for k, v := range signedHeader {
		h[k] = v
	}
	for k, v := range extra {
		h[k] = v
	}
	return h
}

const converseBody = `{"messages":[{"role":"user","content":[{"text":"Say hello to the mock provider."}]}],"system":[{"text":"Be brief."}]}`

// expectBedrockError checks Bedrock's error shape and returns its message.
func expectBedrockError(t *testing.T, resp *http.Response, status int, exception string) string {
	t.Helper()
	b := expectStatus(t, resp, status)
	if got := resp.Header.Get("X-Amzn-ErrorType"); got != exception {
		t.Errorf("X-Amzn-ErrorType %q, want %q", got, exception)
	}
	if resp.Header.Get("Retry-After") != "" {
		t.Errorf("Bedrock sends no Retry-After; got %q", resp.Header.Get("Retry-After"))
	}
	var e struct {
		Message string `json:"message"`
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Message == "" {
		t.Fatalf("not Bedrock's error body: %s", b)
	}
	return e.Message
}

type converseAnswerJSON struct {
	Output struct {
		Message struct {
			Role    string `json:"role"`
			Content []struct {
				Text    *string `json:"text"`
				ToolUse *struct {
					ToolUseID string          `json:"toolUseId"`
					Name      string          `json:"name"`
					Input     json.RawMessage `json:"input"`
				} `json:"toolUse"`
			} `json:"content"`
		} `json:"message"`
	} `json:"output"`
	StopReason string `json:"stopReason"`
	Usage      struct {
		InputTokens, OutputTokens, TotalTokens int
	} `json:"usage"`
	Metrics *struct {
		LatencyMs *int64 `json:"latencyMs"`
	} `json:"metrics"`
}

func TestConverseAnswers(t *testing.T) {
	f := newFixture(t, Config{CompletionTokens: 6})
	resp := f.post("/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse", converseBody, signedHeader)
	b := expectStatus(t, resp, http.StatusOK)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if id := resp.Header.Get("X-Amzn-RequestId"); len(id) != 36 || strings.Count(id, "-") != 4 {
		t.Errorf("request id %q is not shaped like Bedrock's", id)
	}
	var a converseAnswerJSON
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if a.Output.Message.Role != "assistant" || len(a.Output.Message.Content) != 1 || a.Output.Message.Content[0].Text == nil {
		t.Fatalf("answer %s", b)
	}
	if got := *a.Output.Message.Content[0].Text; got != newTextAnswer(6).String() {
		t.Errorf("text %q", got)
	}
	// 3, plus the system's 3 tokens, plus 3 and 8 for the one message.
	if a.StopReason != "end_turn" || a.Usage.InputTokens != 17 || a.Usage.OutputTokens != 6 || a.Usage.TotalTokens != 23 {
		t.Errorf("stop %s usage %+v", a.StopReason, a.Usage)
	}
	if a.Metrics == nil || a.Metrics.LatencyMs == nil {
		t.Errorf("no metrics: %s", b)
	}
	// Under the mock's OpenAI root as well.
	expectStatus(t, f.post("/v1/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse", converseBody, signedHeader), http.StatusOK)
}

func TestConverseCutsTextAtMaxTokens(t *testing.T) {
	f := newFixture(t, Config{CompletionTokens: 10})
	body := `{"messages":[{"role":"user","content":[{"text":"x"}]}],"inferenceConfig":{"maxTokens":3}}`
	var a converseAnswerJSON
	if err := json.Unmarshal(expectStatus(t, f.post("/model/m/converse", body, signedHeader), http.StatusOK), &a); err != nil {
		t.Fatal(err)
	}
	if a.StopReason != "max_tokens" || a.Usage.OutputTokens != 3 {
		t.Errorf("stop %s, %d tokens; want max_tokens, 3", a.StopReason, a.Usage.OutputTokens)
	}
}

const toolBody = `{"messages":[{"role":"user","content":[{"text":"Weather in Paris?"}]}],
	"toolConfig":{"tools":[{"toolSpec":{"name":"weather","inputSchema":{"json":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":3}},"required":["city","days"]}}}}],
	"toolChoice":{"any":{}}}}`

func TestConverseCallsAForcedTool(t *testing.T) {
	f := newFixture(t, Config{})
	var a converseAnswerJSON
	b := expectStatus(t, f.post("/model/m/converse", toolBody, signedHeader), http.StatusOK)
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	if a.StopReason != "tool_use" || len(a.Output.Message.Content) != 1 || a.Output.Message.Content[0].ToolUse == nil {
		t.Fatalf("answer %s", b)
	}
	tu := a.Output.Message.Content[0].ToolUse
	var in struct {
		City string `json:"city"`
		Days int    `json:"days"`
	}
	if err := json.Unmarshal(tu.Input, &in); err != nil || in.City == "" || in.Days < 1 || in.Days > 3 {
		t.Errorf("input %s (%v)", tu.Input, err)
	}
	if tu.Name != "weather" || !strings.HasPrefix(tu.ToolUseID, "tooluse_") {
		t.Errorf("tool use %+v", tu)
	}

	// The round trip: the result answered in text.
	next := `{"messages":[{"role":"user","content":[{"text":"Weather in Paris?"}]},
		{"role":"assistant","content":[{"toolUse":{"toolUseId":"` + tu.ToolUseID + `","name":"weather","input":` + string(tu.Input) + `}}]},
		{"role":"user","content":[{"toolResult":{"toolUseId":"` + tu.ToolUseID + `","content":[{"text":"18C"}]}}]}],
		"toolConfig":{"tools":[{"toolSpec":{"name":"weather","inputSchema":{"json":{"type":"object"}}}}]}}`
	a = converseAnswerJSON{}
	if err := json.Unmarshal(expectStatus(t, f.post("/model/m/converse", next, signedHeader), http.StatusOK), &a); err != nil {
		t.Fatal(err)
	}
	if a.StopReason != "end_turn" || a.Output.Message.Content[0].Text == nil {
		t.Errorf("the result was not answered in text: %+v", a)
	}
}

func TestConverseRefusesWhatBedrockRefuses(t *testing.T) {
	f := newFixture(t, Config{})
	cases := []struct{ name, body, says string }{
		{"not JSON", `{`, "Malformed"},
		{"no messages", `{"messages":[]}`, "start with a user message"},
		{"assistant first", `{"messages":[{"role":"assistant","content":[{"text":"x"}]}]}`, "start with a user message"},
		{"not alternating", `{"messages":[{"role":"user","content":[{"text":"x"}]},{"role":"user","content":[{"text":"y"}]}]}`, "alternate"},
		{"ends with the assistant", `{"messages":[{"role":"user","content":[{"text":"x"}]},{"role":"assistant","content":[{"text":"y"}]}]}`, "end with a user message"},
		{"blank text", `{"messages":[{"role":"user","content":[{"text":" "}]}]}`, "blank"},
		{"two members", `{"messages":[{"role":"user","content":[{"text":"x","image":{"format":"png","source":{"bytes":"AAAA"}}}]}]}`, "exactly one"},
		{"a tiff", `{"messages":[{"role":"user","content":[{"image":{"format":"tiff","source":{"bytes":"AAAA"}}}]}]}`, "format"},
		{"a result of no call", `{"messages":[{"role":"user","content":[{"toolResult":{"toolUseId":"t1","content":[{"text":"x"}]}}]}],"toolConfig":{"tools":[]}}`, "matches no toolUse"},
		{"tool blocks without toolConfig", `{"messages":[{"role":"user","content":[{"text":"x"}]},{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"f","input":{}}}]},{"role":"user","content":[{"toolResult":{"toolUseId":"t1","content":[{"text":"x"}]}}]}]}`, "toolConfig"},
		{"an unknown tool", `{"messages":[{"role":"user","content":[{"text":"x"}]}],"toolConfig":{"tools":[],"toolChoice":{"tool":{"name":"f"}}}}`, "not among the tools"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg := expectBedrockError(t, f.post("/model/m/converse", tc.body, signedHeader), http.StatusBadRequest, "ValidationException")
			if !strings.Contains(msg, tc.says) {
				t.Errorf("message %q does not say %q", msg, tc.says)
			}
		})
	}
}

func TestConverseWantsASignature(t *testing.T) {
	f := newFixture(t, Config{})
	expectBedrockError(t, f.post("/model/m/converse", converseBody, nil), http.StatusForbidden, "MissingAuthenticationTokenException")
	// A Bedrock API key is a bearer token.
	expectStatus(t, f.post("/model/m/converse", converseBody, map[string]string{"Authorization": "Bearer bedrock-api-key"}), http.StatusOK)
}

func TestConverseErrorsInBedrocksShape(t *testing.T) {
	f := newFixture(t, Config{Models: []string{"amazon.nova-lite-v1:0"}})
	for status, exception := range map[string]string{
		"400": "ValidationException", "403": "AccessDeniedException", "429": "ThrottlingException",
		"500": "InternalServerException", "503": "ServiceUnavailableException", "424": "ModelErrorException",
	} {
		expectBedrockError(t, f.post("/model/amazon.nova-lite-v1%3A0/converse", converseBody, withHeader(map[string]string{"X-Mock-Status": status})),
			atoi(t, status), exception)
	}
	expectBedrockError(t, f.post("/model/amazon.titan/converse", converseBody, signedHeader), http.StatusNotFound, "ResourceNotFoundException")
	expectBedrockError(t, f.post("/model/m/invoke", converseBody, signedHeader), http.StatusNotFound, "ResourceNotFoundException")
	expectBedrockError(t, f.post("/model/amazon.nova-lite-v1%3A0/converse-stream", converseBody,
		withHeader(map[string]string{"X-Mock-Stream-Exception": "fooException"})), http.StatusBadRequest, "ValidationException")

	// Past the cap: Bedrock's throttling.
	capped := newFixture(t, Config{MaxConcurrent: 1})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, capped.ts.URL+"/model/m/converse", strings.NewReader(converseBody))
		for k, v := range withHeader(map[string]string{"X-Mock-Latency": "1h"}) {
			req.Header.Set(k, v)
		}
		if resp, err := capped.ts.Client().Do(req); err == nil {
			resp.Body.Close()
			t.Errorf("held request answered %d", resp.StatusCode)
		}
	})
	capped.await(capped.waiting, "a request holding the slot")
	expectBedrockError(t, capped.post("/model/m/converse", converseBody, signedHeader), http.StatusTooManyRequests, "ThrottlingException")
	cancel()
	wg.Wait()
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// streamEvent is one decoded event-stream message.
type streamEvent struct {
	messageType, eventType string
	payload                map[string]any
}

// decodeStream reads every event-stream message of a body.
func decodeStream(t *testing.T, body []byte) []streamEvent {
	t.Helper()
	dec := eventstream.NewDecoder()
	r := bytes.NewReader(body)
	var out []streamEvent
	for {
		m, err := dec.Decode(r, nil)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("after %d messages: %v", len(out), err)
		}
		ev := streamEvent{messageType: m.Headers.Get(":message-type").String()}
		if v := m.Headers.Get(":event-type"); v != nil {
			ev.eventType = v.String()
		}
		if v := m.Headers.Get(":exception-type"); v != nil {
			ev.eventType = v.String()
		}
		if ct := m.Headers.Get(":content-type"); ct == nil || ct.String() != "application/json" {
			t.Errorf("message %d: content type %v", len(out), ct)
		}
		if err := json.Unmarshal(m.Payload, &ev.payload); err != nil {
			t.Fatalf("message %d payload %q: %v", len(out), m.Payload, err)
		}
		out = append(out, ev)
	}
}

func TestConverseStreamSendsEvents(t *testing.T) {
	f := newFixture(t, Config{CompletionTokens: 5})
	resp := f.post("/model/m/converse-stream", converseBody, signedHeader)
	b := expectStatus(t, resp, http.StatusOK)
	if ct := resp.Header.Get("Content-Type"); ct != "application/vnd.amazon.eventstream" {
		t.Errorf("Content-Type %q", ct)
	}
	evs := decodeStream(t, b)
	var types []string
	var text strings.Builder
	for _, ev := range evs {
		if ev.messageType != "event" {
			t.Fatalf("message type %q", ev.messageType)
		}
		types = append(types, ev.eventType)
		if ev.eventType == "contentBlockDelta" {
			d := ev.payload["delta"].(map[string]any)
			text.WriteString(d["text"].(string))
		}
	}
	want := "messageStart contentBlockDelta contentBlockDelta contentBlockDelta contentBlockDelta contentBlockDelta contentBlockStop messageStop metadata"
	if strings.Join(types, " ") != want {
		t.Errorf("events %v\nwant %s", types, want)
	}
	if text.String() != newTextAnswer(5).String() {
		t.Errorf("text %q", text.String())
	}
	if evs[0].payload["role"] != "assistant" || evs[len(evs)-2].payload["stopReason"] != "end_turn" {
		t.Errorf("start %v stop %v", evs[0].payload, evs[len(evs)-2].payload)
	}
	u := evs[len(evs)-1].payload["usage"].(map[string]any)
	if u["inputTokens"] != 17.0 || u["outputTokens"] != 5.0 || u["totalTokens"] != 22.0 {
		t.Errorf("usage %v", u)
	}
}

func TestConverseStreamCallsATool(t *testing.T) {
	f := newFixture(t, Config{})
	evs := decodeStream(t, expectStatus(t, f.post("/model/m/converse-stream", toolBody, signedHeader), http.StatusOK))
	if evs[1].eventType != "contentBlockStart" {
		t.Fatalf("second event %s", evs[1].eventType)
	}
	start := evs[1].payload["start"].(map[string]any)["toolUse"].(map[string]any)
	if start["name"] != "weather" || !strings.HasPrefix(start["toolUseId"].(string), "tooluse_") {
		t.Errorf("start %v", start)
	}
	var input strings.Builder
	for _, ev := range evs {
		if ev.eventType == "contentBlockDelta" {
			input.WriteString(ev.payload["delta"].(map[string]any)["toolUse"].(map[string]any)["input"].(string))
		}
	}
	if !json.Valid([]byte(input.String())) {
		t.Errorf("the input deltas make %q", input.String())
	}
	if stop := evs[len(evs)-2].payload["stopReason"]; stop != "tool_use" {
		t.Errorf("stop reason %v", stop)
	}
}

func TestConverseStreamEndsWithAnException(t *testing.T) {
	f := newFixture(t, Config{CompletionTokens: 4})
	evs := decodeStream(t, expectStatus(t, f.post("/model/m/converse-stream", converseBody,
		withHeader(map[string]string{"X-Mock-Stream-Exception": "throttlingException"})), http.StatusOK))
	var types []string
	for _, ev := range evs {
		types = append(types, ev.messageType+":"+ev.eventType)
	}
	want := "event:messageStart event:contentBlockDelta event:contentBlockDelta exception:throttlingException"
	if strings.Join(types, " ") != want {
		t.Errorf("messages %v\nwant %s", types, want)
	}
	if msg, _ := evs[len(evs)-1].payload["message"].(string); msg == "" {
		t.Error("the exception has no message")
	}
}

func TestConverseStreamStalls(t *testing.T) {
	f := newFixture(t, Config{CompletionTokens: 4})
	resp := f.post("/model/m/converse-stream", converseBody, withHeader(map[string]string{"X-Mock-Stall": "1ms"}))
	f.await(f.stalling, "a stall")
	evs := decodeStream(t, expectStatus(t, resp, http.StatusOK))
	if last := evs[len(evs)-1]; last.eventType != "metadata" {
		t.Errorf("the stalled stream ended with %s", last.eventType)
	}
	if st := f.s.Stats(); st.Stalled != 1 {
		t.Errorf("stalled %d", st.Stalled)
	}
}
