package anthropic

import (
	"encoding/json"
	"testing"

	"github.com/weir-gateway/weir/internal/jsontest"
)

func TestAnswerToChat(t *testing.T) {
	t.Parallel()
	in := `{
		"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-x",
		"content": [
			{"type": "thinking", "thinking": "Let me think.", "signature": "sig"},
			{"type": "text", "text": "Looking "},
			{"type": "text", "text": "it up."},
			{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "a"}},
			{"type": "tool_use", "id": "toolu_2", "name": "noargs", "input": {}}
		],
		"stop_reason": "tool_use", "stop_sequence": null,
		"usage": {"input_tokens": 10, "output_tokens": 20, "cache_creation_input_tokens": 5, "cache_read_input_tokens": 100}
	}`
	got, err := AnswerToChat([]byte(in), 1700000000)
	if err != nil {
		t.Fatal(err)
	}
	jsontest.Equal(t, got, `{
		"id": "msg_01", "object": "chat.completion", "created": 1700000000, "model": "claude-x",
		"choices": [{"index": 0, "logprobs": null, "finish_reason": "tool_calls", "message": {
			"role": "assistant", "content": "Looking it up.", "refusal": null, "reasoning_content": "Let me think.",
			"tool_calls": [
				{"id": "toolu_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\": \"a\"}"}},
				{"id": "toolu_2", "type": "function", "function": {"name": "noargs", "arguments": "{}"}}
			]
		}}],
		"usage": {"prompt_tokens": 115, "completion_tokens": 20, "total_tokens": 135, "prompt_tokens_details": {"cached_tokens": 100}}
	}`)
}

func TestAnswerToChatToolsOnly(t *testing.T) {
	t.Parallel()
	got, err := AnswerToChat([]byte(`{"id":"m","model":"c","content":[{"type":"tool_use","id":"t","name":"f","input":{}}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":2}}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	jsontest.Equal(t, got, `{"id":"m","object":"chat.completion","created":0,"model":"c",
		"choices":[{"index":0,"logprobs":null,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"refusal":null,
			"tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{}"}}]}}],
		"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3,"prompt_tokens_details":{"cached_tokens":0}}}`)
}

func TestStopAndFinishReasons(t *testing.T) {
	t.Parallel()
	for stop, finish := range map[string]string{
		StopEndTurn: "stop", StopSequence: "stop", StopPauseTurn: "stop", StopMaxTokens: "length",
		StopContextExceeded: "length", StopToolUse: "tool_calls", StopRefusal: "content_filter", "new_reason": "stop",
	} {
		if got := FinishReason(stop); got != finish {
			t.Errorf("FinishReason(%q) = %q, want %q", stop, got, finish)
		}
	}
	for finish, stop := range map[string]string{
		"stop": StopEndTurn, "length": StopMaxTokens, "tool_calls": StopToolUse, "function_call": StopToolUse,
		"content_filter": StopRefusal, "": StopEndTurn,
	} {
		if got := StopReason(finish); got != stop {
			t.Errorf("StopReason(%q) = %q, want %q", finish, got, stop)
		}
	}
}

func TestAnswerFromChat(t *testing.T) {
	t.Parallel()
	in := `{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-x",
		"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
			"role": "assistant", "content": "Sure.", "reasoning_content": "thought",
			"tool_calls": [
				{"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":\"a\"}"}},
				{"id": "call_2", "type": "function", "function": {"name": "broken", "arguments": "{\"q\":"}}
			]
		}}],
		"usage": {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57, "prompt_tokens_details": {"cached_tokens": 30}}
	}`
	got, err := AnswerFromChat([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	jsontest.Equal(t, got, `{
		"id": "chatcmpl-1", "type": "message", "role": "assistant", "model": "gpt-x",
		"content": [
			{"type": "thinking", "thinking": "thought", "signature": ""},
			{"type": "text", "text": "Sure."},
			{"type": "tool_use", "id": "call_1", "name": "lookup", "input": {"q": "a"}},
			{"type": "tool_use", "id": "call_2", "name": "broken", "input": {}}
		],
		"stop_reason": "tool_use", "stop_sequence": null,
		"usage": {"input_tokens": 20, "output_tokens": 7, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 30}
	}`)
}

func TestAnswerFromChatFinish(t *testing.T) {
	t.Parallel()
	for finish, stop := range map[string]string{"stop": "end_turn", "length": "max_tokens", "content_filter": "refusal"} {
		got, err := AnswerFromChat([]byte(`{"id":"c","model":"g","choices":[{"index":0,"finish_reason":"` + finish + `","message":{"role":"assistant","content":"x"}}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`))
		if err != nil {
			t.Fatal(err)
		}
		jsontest.Equal(t, got, `{"id":"c","type":"message","role":"assistant","model":"g","content":[{"type":"text","text":"x"}],
			"stop_reason":"`+stop+`","stop_sequence":null,
			"usage":{"input_tokens":3,"output_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`)
	}
}

// AnswerFromChat's encoding of an answer is json.Marshal's of the Answer.
func TestAnswerAppendJSONIsMarshal(t *testing.T) {
	t.Parallel()
	stop := StopToolUse
	for _, a := range []Answer{
		{ID: "msg_1", Type: "message", Role: "assistant", Model: "m <x>", Content: []Block{}, StopReason: &stop},
		{ID: "msg_2", Type: "message", Role: "assistant", Model: "m", StopReason: &stop, Usage: Usage{InputTokens: 3, OutputTokens: 4},
			Content: []Block{
				{Type: BlockThinking, Thinking: "hmm & <so>"},
				{Type: BlockText, Text: "hi \"there\" \u2028", CacheControl: json.RawMessage(`{"type": "ephemeral"}`)},
				{Type: BlockText},
				{Type: BlockToolUse, ID: "t1", Name: "f", Input: json.RawMessage(`{"a": [1, 2]}`)},
				{Type: BlockToolUse, ID: "t2", Name: "g"},
				{Type: BlockRedactedThinking, Data: "xyz"},
			}},
		{},
	} {
		want, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.appendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("appendJSON:\n%s\nwant\n%s", got, want)
		}
	}
}
