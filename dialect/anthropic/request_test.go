package anthropic

import (
	"strings"
	"testing"

	"github.com/weir-gateway/weir/internal/jsontest"
)

func TestRequestFromChat(t *testing.T) {
	t.Parallel()
	in := `{
		"model": "claude-x",
		"messages": [
			{"role": "system", "content": "Be brief."},
			{"role": "developer", "content": [{"type": "text", "text": "Use tools."}]},
			{"role": "user", "content": [
				{"type": "text", "text": "What is in these?"},
				{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
				{"type": "image_url", "image_url": {"url": "https://example.com/a.jpg", "detail": "high"}}
			]},
			{"role": "assistant", "content": "Let me look.", "tool_calls": [
				{"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":\"a\"}"}},
				{"id": "call_2", "type": "function", "function": {"name": "lookup", "arguments": ""}}
			]},
			{"role": "tool", "tool_call_id": "call_1", "content": "a cat"},
			{"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "a dog"}]},
			{"role": "user", "content": "And?"}
		],
		"max_completion_tokens": 300,
		"max_tokens": 100,
		"temperature": 1.5,
		"top_p": 0.9,
		"top_k": 40,
		"stop": "END",
		"stream": true,
		"stream_options": {"include_usage": true},
		"user": "u-1",
		"tools": [
			{"type": "function", "function": {"name": "lookup", "description": "Look up", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}},
			{"type": "function", "function": {"name": "noargs"}}
		],
		"tool_choice": {"type": "function", "function": {"name": "lookup"}},
		"parallel_tool_calls": false,
		"seed": 7
	}`
	r, err := RequestFromChat([]byte(in), DefaultMaxTokens)
	if err != nil {
		t.Fatal(err)
	}
	jsontest.Equal(t, mustJSON(t, r), `{
		"model": "claude-x",
		"max_tokens": 300,
		"system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Use tools."}],
		"messages": [
			{"role": "user", "content": [
				{"type": "text", "text": "What is in these?"},
				{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
				{"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}}
			]},
			{"role": "assistant", "content": [
				{"type": "text", "text": "Let me look."},
				{"type": "tool_use", "id": "call_1", "name": "lookup", "input": {"q": "a"}},
				{"type": "tool_use", "id": "call_2", "name": "lookup", "input": {}}
			]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "call_1", "content": [{"type": "text", "text": "a cat"}]},
				{"type": "tool_result", "tool_use_id": "call_2", "content": [{"type": "text", "text": "a dog"}]},
				{"type": "text", "text": "And?"}
			]}
		],
		"tools": [
			{"name": "lookup", "description": "Look up", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}},
			{"name": "noargs", "input_schema": {"type": "object", "properties": {}}}
		],
		"tool_choice": {"type": "tool", "name": "lookup", "disable_parallel_tool_use": true},
		"stop_sequences": ["END"],
		"temperature": 1,
		"top_p": 0.9,
		"top_k": 40,
		"metadata": {"user_id": "u-1"},
		"stream": true
	}`)
}

func TestRequestFromChatFields(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, extra, want string
	}{
		{"default max tokens", ``, `"max_tokens":4096`},
		{"max_tokens", `,"max_tokens":12`, `"max_tokens":12`},
		{"stop array", `,"stop":["a","b"]`, `"stop_sequences":["a","b"]`},
		{"auto", `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto"`, `"tool_choice":{"type":"auto"}`},
		{"required", `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"`, `"tool_choice":{"type":"any"}`},
		{"none", `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"`, `"tool_choice":{"type":"none"}`},
		{"parallel off alone", `,"tools":[{"type":"function","function":{"name":"f"}}],"parallel_tool_calls":false`, `"tool_choice":{"type":"auto","disable_parallel_tool_use":true}`},
		{"temperature kept", `,"temperature":0.3`, `"temperature":0.3`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"m","messages":[{"role":"user","content":"hi"}]` + tc.extra + `}`
			r, err := RequestFromChat([]byte(body), DefaultMaxTokens)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(mustJSON(t, r)); !strings.Contains(got, tc.want) {
				t.Fatalf("got %s, want it to hold %s", got, tc.want)
			}
		})
	}
}

func TestRequestFromChatRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, param string
	}{
		{"n", `{"model":"m","n":2,"messages":[{"role":"user","content":"hi"}]}`, "n"},
		{"logprobs", `{"model":"m","logprobs":true,"messages":[{"role":"user","content":"hi"}]}`, "logprobs"},
		{"json schema", `{"model":"m","response_format":{"type":"json_schema"},"messages":[{"role":"user","content":"hi"}]}`, "response_format"},
		{"functions", `{"model":"m","functions":[{"name":"f"}],"messages":[{"role":"user","content":"hi"}]}`, "functions"},
		{"audio out", `{"model":"m","modalities":["text","audio"],"messages":[{"role":"user","content":"hi"}]}`, "modalities"},
		{"audio in", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]}`, "messages[0].content[0].type"},
		{"bad arguments", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`, "messages[1].tool_calls[0].function.arguments"},
		{"role", `{"model":"m","messages":[{"role":"function","content":"x"}]}`, "messages[0].role"},
		{"only system", `{"model":"m","messages":[{"role":"system","content":"x"}]}`, "messages"},
		{"tool type", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"custom","custom":{}}]}`, "tools[0].type"},
		{"tool choice", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tool_choice":"sometimes"}`, "tool_choice"},
		{"data url", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png,raw"}}]}]}`, "messages[0].content[0].image_url.url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RequestFromChat([]byte(tc.body), DefaultMaxTokens)
			if err == nil || err.Param != tc.param {
				t.Fatalf("got %v, want a refusal of %s", err, tc.param)
			}
		})
	}
}

func TestRequestToChat(t *testing.T) {
	t.Parallel()
	in := `{
		"model": "claude-x",
		"max_tokens": 1024,
		"system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "Be kind."}],
		"messages": [
			{"role": "user", "content": "Hello"},
			{"role": "assistant", "content": [
				{"type": "text", "text": "Checking."},
				{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "a"}}
			]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a cat"},
				{"type": "tool_result", "tool_use_id": "toolu_2", "is_error": false, "content": [{"type": "text", "text": "failed"}, {"type": "text", "text": " twice"}]},
				{"type": "text", "text": "Look:"},
				{"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/"}},
				{"type": "image", "source": {"type": "url", "url": "https://example.com/b.png"}}
			]}
		],
		"tools": [{"name": "lookup", "description": "Look up", "input_schema": {"type": "object"}}, {"type": "custom", "name": "bare"}],
		"tool_choice": {"type": "any", "disable_parallel_tool_use": true},
		"stop_sequences": ["END", "STOP"],
		"temperature": 0.5,
		"top_p": 0.8,
		"top_k": 5,
		"metadata": {"user_id": "u-9"},
		"thinking": {"type": "disabled"},
		"stream": true
	}`
	r, perr := ParseRequest([]byte(in))
	if perr != nil {
		t.Fatal(perr)
	}
	got, err := RequestToChat(r)
	if err != nil {
		t.Fatal(err)
	}
	jsontest.Equal(t, got, `{
		"model": "claude-x",
		"messages": [
			{"role": "system", "content": "Be brief.\n\nBe kind."},
			{"role": "user", "content": "Hello"},
			{"role": "assistant", "content": "Checking.", "tool_calls": [
				{"id": "toolu_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\": \"a\"}"}}
			]},
			{"role": "tool", "tool_call_id": "toolu_1", "content": "a cat"},
			{"role": "tool", "tool_call_id": "toolu_2", "content": "failed twice"},
			{"role": "user", "content": [
				{"type": "text", "text": "Look:"},
				{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/"}},
				{"type": "image_url", "image_url": {"url": "https://example.com/b.png"}}
			]}
		],
		"max_tokens": 1024,
		"temperature": 0.5,
		"top_p": 0.8,
		"stop": ["END", "STOP"],
		"stream": true,
		"stream_options": {"include_usage": true},
		"tools": [
			{"type": "function", "function": {"name": "lookup", "description": "Look up", "parameters": {"type": "object"}}},
			{"type": "function", "function": {"name": "bare", "parameters": {"type": "object"}}}
		],
		"tool_choice": "required",
		"parallel_tool_calls": false,
		"user": "u-9"
	}`)
}

func TestRequestToChatToolChoice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ choice, want string }{
		{`{"type":"auto"}`, `"tool_choice":"auto"`},
		{`{"type":"none"}`, `"tool_choice":"none"`},
		{`{"type":"tool","name":"f"}`, `"tool_choice":{"function":{"name":"f"},"type":"function"}`},
	} {
		r, perr := ParseRequest([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":` + tc.choice + `}`))
		if perr != nil {
			t.Fatal(perr)
		}
		got, err := RequestToChat(r)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(got), tc.want) {
			t.Errorf("tool_choice %s: got %s, want it to hold %s", tc.choice, got, tc.want)
		}
	}
}

// TestRequestToChatRefuses: what is wrong is refused; what the
// translation cannot carry is refused as Unsupported, for a platform that
// speaks the Messages API itself.
func TestRequestToChatRefuses(t *testing.T) {
	t.Parallel()
	const thinks = `{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"text","text":"ok"}]}`
	for _, tc := range []struct {
		name, body, param string
		unsupported       bool
	}{
		{"server tool", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, "tools.0.type", true},
		{"document", `{"model":"m","messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"x"}}]}]}`, "messages.0.content.0.type", true},
		{"image result", `{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]}]}`, "messages.0.content.0.content.0.type", true},
		{"file source", `{"model":"m","messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"f"}}]}]}`, "messages.0.content.0.source.type", true},
		{"thinking enabled", `{"model":"m","thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}]}`, "thinking", true},
		{"thinking block", `{"model":"m","messages":[{"role":"user","content":"hi"},` + thinks + `]}`, "messages.1.content.0.type", true},
		{"redacted thinking", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"redacted_thinking","data":"xyz"}]}]}`, "messages.1.content.0.type", true},
		{"tool error", `{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","is_error":true,"content":"failed"}]}]}`, "messages.0.content.0.is_error", true},
		{"assistant image", `{"model":"m","messages":[{"role":"assistant","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]}`, "messages.0.content.0", false},
		{"tool choice", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tool_choice":{"type":"maybe"}}`, "tool_choice.type", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, perr := ParseRequest([]byte(tc.body))
			if perr != nil {
				t.Fatal(perr)
			}
			_, err := RequestToChat(r)
			if err == nil || err.Param != tc.param || err.Unsupported != tc.unsupported {
				t.Fatalf("got %+v, want a refusal of %s, unsupported %v", err, tc.param, tc.unsupported)
			}
		})
	}
}

func TestParseRequestRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ body, param string }{
		{`{"messages":[{"role":"user","content":"hi"}]}`, "model"},
		{`{"model":"m","messages":[]}`, "messages"},
		{`{"model":"m","messages":[{"role":"system","content":"hi"}]}`, "messages.0.role"},
		{`{"model":"m","messages":[{"role":"user","content":7}]}`, ""},
		{`[1]`, ""},
	} {
		if _, err := ParseRequest([]byte(tc.body)); err == nil || err.Param != tc.param {
			t.Errorf("%s: got %v, want a refusal of %q", tc.body, err, tc.param)
		}
	}
}

func TestEstimateInputTokens(t *testing.T) {
	t.Parallel()
	small, _ := ParseRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	big, _ := ParseRequest([]byte(`{"model":"m","system":"` + strings.Repeat("x", 400) + `","messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","source":{"type":"url","url":"u"}}]}]}`))
	if s, b := EstimateInputTokens(small), EstimateInputTokens(big); s <= 0 || b < s+100+imageTokens {
		t.Fatalf("estimates %d and %d: want a positive one and one larger by the system prompt and the image", s, b)
	}
	// A Chinese prompt counts a token a character, not one for every
	// four of its three-byte characters' bytes.
	zh, _ := ParseRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("你好世界", 100) + `"}]}`))
	if n := EstimateInputTokens(zh) - EstimateInputTokens(small) + 1; n != 400 {
		t.Errorf("400 Chinese characters estimated at %d tokens, want 400", n)
	}
}
