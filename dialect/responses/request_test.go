package responses

import (
	"errors"
	"testing"

	"github.com/weir-gateway/weir/internal/jsontest"
)

func TestChatBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want string
	}{{
		name: "a string input and instructions",
		in:   `{"model":"m","instructions":"Be brief.","input":"Hello"}`,
		want: `{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello"}]}`,
	}, {
		name: "the sampling and routing fields",
		in: `{"model":"m","input":"hi","max_output_tokens":100,"temperature":0.2,"top_p":0.9,"frequency_penalty":0.5,"presence_penalty":-0.5,
			"user":"u1","service_tier":"flex","prompt_cache_key":"k","prompt_cache_retention":"24h","safety_identifier":"s",
			"reasoning":{"effort":"low","summary":"auto"},"text":{"verbosity":"low"},"metadata":{"a":"b"},"parallel_tool_calls":false,
			"store":false,"include":["reasoning.encrypted_content"],"truncation":"disabled","background":false,"previous_response_id":null,
			"stream_options":{"include_obfuscation":false},"max_tool_calls":3,"top_logprobs":0}`,
		want: `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":100,"temperature":0.2,"top_p":0.9,
			"frequency_penalty":0.5,"presence_penalty":-0.5,"user":"u1","service_tier":"flex","prompt_cache_key":"k",
			"prompt_cache_retention":"24h","safety_identifier":"s","reasoning_effort":"low","verbosity":"low"}`,
	}, {
		name: "a stream asks for its usage",
		in:   `{"model":"m","input":"hi","stream":true}`,
		want: `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`,
	}, {
		name: "messages of every role and part",
		in: `{"model":"m","input":[
			{"role":"developer","content":"Rules."},
			{"type":"message","role":"system","content":[{"type":"input_text","text":"More rules."}]},
			{"role":"user","content":[{"type":"input_text","text":"What is this?"},
				{"type":"input_image","image_url":"https://example.com/a.png","detail":"low"},
				{"type":"input_file","file_data":"data:application/pdf;base64,AAAA","filename":"a.pdf"},
				{"type":"input_file","file_id":"file-1"}]},
			{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"A cat.","annotations":[]}]},
			{"role":"assistant","content":[{"type":"refusal","refusal":"No."}]},
			{"role":"assistant","content":"Plain."}]}`,
		want: `{"model":"m","messages":[
			{"role":"system","content":"Rules."},
			{"role":"system","content":[{"type":"text","text":"More rules."}]},
			{"role":"user","content":[{"type":"text","text":"What is this?"},
				{"type":"image_url","image_url":{"url":"https://example.com/a.png","detail":"low"}},
				{"type":"file","file":{"file_data":"data:application/pdf;base64,AAAA","filename":"a.pdf"}},
				{"type":"file","file":{"file_id":"file-1"}}]},
			{"role":"assistant","content":"A cat."},
			{"role":"assistant","content":null,"refusal":"No."},
			{"role":"assistant","content":"Plain."}]}`,
	}, {
		name: "a function tool round trip",
		in: `{"model":"m","tools":[{"type":"function","name":"weather","description":"Weather in a city","parameters":{"type":"object"},"strict":true}],
			"tool_choice":{"type":"function","name":"weather"},"parallel_tool_calls":true,
			"input":[{"role":"user","content":"Weather in Paris and Rome?"},
			{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Let me look."}]},
			{"type":"function_call","id":"fc_1","call_id":"call_a","name":"weather","arguments":"{\"city\":\"Paris\"}","status":"completed"},
			{"type":"function_call","id":"fc_2","call_id":"call_b","name":"weather","arguments":"{\"city\":\"Rome\"}"},
			{"type":"function_call_output","call_id":"call_a","output":"20C"},
			{"type":"function_call_output","call_id":"call_b","output":[{"type":"input_text","text":"25C"}]},
			{"type":"function_call","call_id":"call_c","name":"weather","arguments":"{}"}]}`,
		want: `{"model":"m","tools":[{"type":"function","function":{"name":"weather","description":"Weather in a city","parameters":{"type":"object"},"strict":true}}],
			"tool_choice":{"type":"function","function":{"name":"weather"}},"parallel_tool_calls":true,
			"messages":[{"role":"user","content":"Weather in Paris and Rome?"},
			{"role":"assistant","content":"Let me look.","tool_calls":[
				{"id":"call_a","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}},
				{"id":"call_b","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Rome\"}"}}]},
			{"role":"tool","tool_call_id":"call_a","content":"20C"},
			{"role":"tool","tool_call_id":"call_b","content":[{"type":"text","text":"25C"}]},
			{"role":"assistant","content":null,"tool_calls":[{"id":"call_c","type":"function","function":{"name":"weather","arguments":"{}"}}]}]}`,
	}, {
		name: "tool_choice strings",
		in:   `{"model":"m","input":"hi","tools":[{"type":"function","name":"f"}],"tool_choice":"required"}`,
		want: `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}`,
	}, {
		name: "a JSON schema",
		in:   `{"model":"m","input":"hi","text":{"format":{"type":"json_schema","name":"person","description":"A person","schema":{"type":"object","properties":{"name":{"type":"string"}}},"strict":true}}}`,
		want: `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"person","description":"A person","schema":{"type":"object","properties":{"name":{"type":"string"}}},"strict":true}}}`,
	}, {
		name: "JSON mode",
		in:   `{"model":"m","input":"hi","text":{"format":{"type":"json_object"}}}`,
		want: `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}`,
	}, {
		// OpenAI requires a text part's text, empty or not.
		name: "an empty text part keeps its text",
		in:   `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":""},{"type":"input_image","image_url":"https://example.com/a.png"}]}]}`,
		want: `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":""},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`,
	}, {
		name: "plain text format",
		in:   `{"model":"m","input":"hi","text":{"format":{"type":"text"}}}`,
		want: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := Parse([]byte(tc.in))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got, err := r.ChatBody()
			if err != nil {
				t.Fatalf("ChatBody: %v", err)
			}
			if g, w := jsontest.Canonical(t, got), jsontest.Canonical(t, []byte(tc.want)); g != w {
				t.Errorf("chat body\n got %s\nwant %s", g, w)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, param string
		unsupported     bool
	}{
		{"previous_response_id", `{"model":"m","input":"hi","previous_response_id":"resp_1"}`, "previous_response_id", true},
		{"conversation", `{"model":"m","input":"hi","conversation":"conv_1"}`, "conversation", true},
		{"store", `{"model":"m","input":"hi","store":true}`, "store", true},
		{"background", `{"model":"m","input":"hi","background":true}`, "background", true},
		{"prompt", `{"model":"m","input":"hi","prompt":{"id":"pmpt_1"}}`, "prompt", true},
		{"truncation", `{"model":"m","input":"hi","truncation":"auto"}`, "truncation", true},
		{"top_logprobs", `{"model":"m","input":"hi","top_logprobs":3}`, "top_logprobs", true},
		{"include logprobs", `{"model":"m","input":"hi","include":["message.output_text.logprobs"]}`, "include", true},
		{"web search", `{"model":"m","input":"hi","tools":[{"type":"function","name":"f"},{"type":"web_search"}]}`, "tools[1].type", true},
		{"file search", `{"model":"m","input":"hi","tools":[{"type":"file_search","vector_store_ids":["vs_1"]}]}`, "tools[0].type", true},
		{"computer use", `{"model":"m","input":"hi","tools":[{"type":"computer_use_preview"}]}`, "tools[0].type", true},
		{"code interpreter", `{"model":"m","input":"hi","tools":[{"type":"code_interpreter"}]}`, "tools[0].type", true},
		{"mcp", `{"model":"m","input":"hi","tools":[{"type":"mcp","server_label":"x"}]}`, "tools[0].type", true},
		{"image generation", `{"model":"m","input":"hi","tools":[{"type":"image_generation"}]}`, "tools[0].type", true},
		{"a built-in tool_choice", `{"model":"m","input":"hi","tool_choice":{"type":"file_search"}}`, "tool_choice.type", true},
		{"a reasoning item", `{"model":"m","input":[{"type":"reasoning","id":"rs_1","summary":[]}]}`, "input[0]", true},
		{"an item reference", `{"model":"m","input":[{"role":"user","content":"hi"},{"type":"item_reference","id":"msg_1"}]}`, "input[1]", true},
		{"a built-in tool's call", `{"model":"m","input":[{"type":"web_search_call","id":"ws_1"}]}`, "input[0].type", true},
		{"an image by file id", `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"file-1"}]}]}`, "input[0].content[0].file_id", true},
		{"a file by URL", `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_url":"https://x/a.pdf"}]}]}`, "input[0].content[0].file_url", true},
		{"an image in a call's output", `{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"https://x/a.png"}]}]}`, "input[0].output[0]", true},
		{"audio", `{"model":"m","input":[{"role":"user","content":[{"type":"input_audio"}]}]}`, "input[0].content[0].type", true},

		{"an unknown parameter", `{"model":"m","input":"hi","seed":1}`, "seed", false},
		{"no model", `{"input":"hi"}`, "model", false},
		{"no input", `{"model":"m"}`, "input", false},
		{"a null input", `{"model":"m","input":null}`, "input", false},
		{"a model that is no string", `{"model":3,"input":"hi"}`, "model", false},
		{"a bad role", `{"model":"m","input":[{"role":"tool","content":"x"}]}`, "input[0].role", false},
		{"a message without content", `{"model":"m","input":[{"role":"user"}]}`, "input[0].content", false},
		{"an image in a system message", `{"model":"m","input":[{"role":"system","content":[{"type":"input_image","image_url":"https://x"}]}]}`, "input[0].content[0].type", false},
		{"output text from the user", `{"model":"m","input":[{"role":"user","content":[{"type":"output_text","text":"x"}]}]}`, "input[0].content[0].type", false},
		{"an image without a URL", `{"model":"m","input":[{"role":"user","content":[{"type":"input_image"}]}]}`, "input[0].content[0].image_url", false},
		{"a call without call_id", `{"model":"m","input":[{"type":"function_call","name":"f","arguments":"{}"}]}`, "input[0].call_id", false},
		{"a call without name", `{"model":"m","input":[{"type":"function_call","call_id":"c","arguments":"{}"}]}`, "input[0].name", false},
		{"an output without call_id", `{"model":"m","input":[{"type":"function_call_output","output":"x"}]}`, "input[0].call_id", false},
		{"an output without output", `{"model":"m","input":[{"type":"function_call_output","call_id":"c"}]}`, "input[0].output", false},
		{"a function without a name", `{"model":"m","input":"hi","tools":[{"type":"function"}]}`, "tools[0].name", false},
		{"a schema without a name", `{"model":"m","input":"hi","text":{"format":{"type":"json_schema","schema":{}}}}`, "text.format.name", false},
		{"a schema without a schema", `{"model":"m","input":"hi","text":{"format":{"type":"json_schema","name":"x"}}}`, "text.format.schema", false},
		{"an unknown format", `{"model":"m","input":"hi","text":{"format":{"type":"yaml"}}}`, "text.format.type", false},
		{"no output tokens", `{"model":"m","input":"hi","max_output_tokens":0}`, "max_output_tokens", false},
		{"a bad tool_choice", `{"model":"m","input":"hi","tool_choice":"always"}`, "tool_choice", false},
		{"a function tool_choice without a name", `{"model":"m","input":"hi","tool_choice":{"type":"function"}}`, "tool_choice.name", false},
		{"not an object", `[1,2]`, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.in))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse: %v; want an *Error", err)
			}
			if e.Param != tc.param || e.Unsupported != tc.unsupported {
				t.Errorf("param %q unsupported %v (%s); want %q, %v", e.Param, e.Unsupported, e.Message, tc.param, tc.unsupported)
			}
			if e.Message == "" {
				t.Error("no message")
			}
		})
	}
}
