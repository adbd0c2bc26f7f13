package responses

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/weir-gateway/weir/internal/jsontest"
)

// testNow is the time the tests translate at.
var testNow = time.Unix(1700000000, 0)

// testTranslation translates the answer to the request in, its ids
// numbered in the order they are made.
func testTranslation(t *testing.T, in string) *Translation {
	t.Helper()
	r, err := Parse([]byte(in))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	n := 0
	return &Translation{Req: r, ID: "resp_1", CreatedAt: 1700000000, NewID: func(prefix string) string {
		n++
		return prefix + strconv.Itoa(n)
	}}
}

func TestFromChat(t *testing.T) {
	t.Parallel()
	const usage = `"usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25,"prompt_tokens_details":{"cached_tokens":8},"completion_tokens_details":{"reasoning_tokens":2}}`
	const wantUsage = `"usage":{"input_tokens":20,"input_tokens_details":{"cached_tokens":8},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":25}`
	// echo is what a response repeats of the request `{"model":"m","input":"hi"}`.
	const echo = `"id":"resp_1","object":"response","created_at":1700000000,"background":false,"error":null,
		"instructions":null,"max_output_tokens":null,"model":"gpt-x","parallel_tool_calls":true,"previous_response_id":null,
		"reasoning":{"effort":null,"summary":null},"service_tier":null,"store":false,"temperature":null,"text":{"format":{"type":"text"}},
		"tool_choice":"auto","tools":[],"top_p":null,"truncation":"disabled","user":null,"metadata":{}`
	for _, tc := range []struct {
		name, req, chat, want string
	}{{
		name: "text",
		req:  `{"model":"m","input":"hi"}`,
		chat: `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there.","refusal":null},"finish_reason":"stop"}],` + usage + `}`,
		want: `{` + echo + `,"status":"completed","incomplete_details":null,
			"output":[{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Hello there."}]}],` + wantUsage + `}`,
	}, {
		name: "tool calls, one without an id",
		req:  `{"model":"m","input":"hi"}`,
		chat: `{"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[
			{"id":"call_a","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}},
			{"type":"function","function":{"name":"time","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
		want: `{` + echo + `,"status":"completed","incomplete_details":null,"usage":null,"output":[
			{"id":"fc_1","type":"function_call","status":"completed","call_id":"call_a","name":"weather","arguments":"{\"city\":\"Paris\"}"},
			{"id":"fc_3","type":"function_call","status":"completed","call_id":"call_2","name":"time","arguments":"{}"}]}`,
	}, {
		name: "text beside a tool call",
		req:  `{"model":"m","input":"hi"}`,
		chat: `{"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"Looking.","tool_calls":[
			{"id":"call_a","type":"function","function":{"name":"weather","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
		want: `{` + echo + `,"status":"completed","incomplete_details":null,"usage":null,"output":[
			{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Looking."}]},
			{"id":"fc_2","type":"function_call","status":"completed","call_id":"call_a","name":"weather","arguments":"{}"}]}`,
	}, {
		name: "cut short by max_output_tokens",
		req:  `{"model":"m","input":"hi"}`,
		chat: `{"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"Once upon"},"finish_reason":"length"}]}`,
		want: `{` + echo + `,"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":null,
			"output":[{"id":"msg_1","type":"message","status":"incomplete","role":"assistant","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Once upon"}]}]}`,
	}, {
		name: "filtered",
		req:  `{"model":"m","input":"hi"}`,
		chat: `{"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"content_filter"}]}`,
		want: `{` + echo + `,"status":"incomplete","incomplete_details":{"reason":"content_filter"},"usage":null,"output":[]}`,
	}, {
		name: "a refusal",
		req:  `{"model":"m","input":"hi"}`,
		chat: `{"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I cannot."},"finish_reason":"stop"}]}`,
		want: `{` + echo + `,"status":"completed","incomplete_details":null,"usage":null,
			"output":[{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"refusal","refusal":"I cannot."}]}]}`,
	}, {
		name: "what the request set, repeated",
		req: `{"model":"m","input":"hi","instructions":"Be brief.","max_output_tokens":50,"temperature":0.5,"top_p":0.8,"user":"u",
			"metadata":{"k":"v"},"parallel_tool_calls":false,"reasoning":{"effort":"low"},"service_tier":"flex",
			"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"tool_choice":"required",
			"text":{"format":{"type":"json_object"},"verbosity":"low"}}`,
		chat: `{"model":"gpt-x","service_tier":"default","choices":[{"index":0,"message":{"role":"assistant","content":"{}"},"finish_reason":"stop"}]}`,
		want: `{"id":"resp_1","object":"response","created_at":1700000000,"background":false,"error":null,"status":"completed","incomplete_details":null,
			"instructions":"Be brief.","max_output_tokens":50,"model":"gpt-x","parallel_tool_calls":false,"previous_response_id":null,
			"reasoning":{"effort":"low","summary":null},"service_tier":"default","store":false,"temperature":0.5,
			"text":{"format":{"type":"json_object"},"verbosity":"low"},"tool_choice":"required",
			"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"top_p":0.8,"truncation":"disabled","user":"u",
			"metadata":{"k":"v"},"usage":null,
			"output":[{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"{}"}]}]}`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := testTranslation(t, tc.req).FromChat([]byte(tc.chat))
			if err != nil {
				t.Fatalf("FromChat: %v", err)
			}
			if g, w := jsontest.Canonical(t, got), jsontest.Canonical(t, []byte(tc.want)); g != w {
				t.Errorf("response\n got %s\nwant %s", g, w)
			}
		})
	}
}

func TestFromChatRefusesWhatIsNoCompletion(t *testing.T) {
	t.Parallel()
	if _, err := testTranslation(t, `{"model":"m","input":"hi"}`).FromChat([]byte(`<html>`)); err == nil {
		t.Fatal("no error for an answer that is not JSON")
	}
}

// The response's usage is exact when the upstream's total is missing.
func TestUsageTotal(t *testing.T) {
	t.Parallel()
	got, err := testTranslation(t, `{"model":"m","input":"hi"}`).FromChat([]byte(`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}`))
	if err != nil {
		t.Fatal(err)
	}
	var r Response
	if err := json.Unmarshal(got, &r); err != nil {
		t.Fatal(err)
	}
	if r.Usage == nil || r.Usage.TotalTokens != 7 || r.Model != "m" {
		t.Errorf("usage %+v, model %q; want a total of 7 and the request's model", r.Usage, r.Model)
	}
}

// FromChat's encoding of a response is json.Marshal's of the Response.
func TestResponseAppendJSONIsMarshal(t *testing.T) {
	t.Parallel()
	refusal, effort := "no <way> & \u2028", "low"
	tr := &Translation{Req: &Request{Model: "m", Metadata: map[string]string{"a": "<b>"}, Reasoning: &Reasoning{Effort: &effort}},
		ID: "resp_1", CreatedAt: 7, NewID: func(p string) string { return p + "x" }}
	for _, resp := range []Response{
		tr.response(""),
		func() Response {
			r := tr.response("up")
			r.Output = append(r.Output,
				OutputItem{Type: ItemMessage, ID: "msg_1", Status: StatusCompleted, Role: "assistant",
					Content: []OutputPart{{Type: PartOutputText, Text: "hi \"there\" <x>"}, {Type: PartRefusal, Refusal: refusal}}},
				OutputItem{Type: ItemMessage, ID: "msg_2", Status: StatusIncomplete, Role: "assistant"},
				OutputItem{Type: ItemFunctionCall, ID: "fc_1", Status: StatusCompleted, CallID: "c", Name: "f", Arguments: `{"a":1}`})
			r.Usage = &Usage{InputTokens: 1, OutputTokens: 2, TotalTokens: 3}
			finished(&r, "length")
			return r
		}(),
		func() Response {
			temp, topP, max, desc, strict, user := 0.2, 1e-7, int64(5), "d <x>", true, "u"
			r := tr.response("")
			r.Temperature, r.TopP, r.MaxOutputTokens, r.User, r.ServiceTier = &temp, &topP, &max, &user, &user
			r.Instructions, r.Error = &desc, &ResponseError{Code: "server_error", Message: "m"}
			r.Text = TextConfig{Format: &Format{Type: "json_schema", Name: "n", Schema: json.RawMessage(`{ "type": "object" }`),
				Description: &desc, Strict: &strict}, Verbosity: "low"}
			r.ToolChoice = json.RawMessage(`{"type":"function","name":"f"}`)
			r.Tools = []json.RawMessage{json.RawMessage(`{"type":"function", "name":"f"}`), json.RawMessage(`{"type":"function","name":"g"}`)}
			r.Metadata = map[string]string{}
			return r
		}(),
		{Text: TextConfig{Verbosity: "high"}},
		{},
	} {
		want, err := json.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		got, err := resp.appendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("appendJSON:\n%s\nwant\n%s", got, want)
		}
	}
}
