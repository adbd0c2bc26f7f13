package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/weir-gateway/weir/internal/jsontest"
)

func translate(t *testing.T, body string) *Translated {
	t.Helper()
	tr, err := FromChat([]byte(body))
	if err != nil {
		t.Fatalf("FromChat: %v", err)
	}
	return tr
}

func TestFromChatTranslatesEveryField(t *testing.T) {
	t.Parallel()
	body := `{
		"model": "gemini-2.5-flash",
		"stream": true,
		"stream_options": {"include_usage": true},
		"messages": [
			{"role": "system", "content": "Be brief."},
			{"role": "developer", "content": [{"type": "text", "text": "Answer in French."}]},
			{"role": "user", "content": [
				{"type": "text", "text": "What is in these?"},
				{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
				{"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg?size=2"}},
				{"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
				{"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"}}
			]},
			{"role": "assistant", "content": "Let me look.", "tool_calls": [
				{"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":\"cat\"}"},
				 "extra_content": {"google": {"thought_signature": "c2lnMQ=="}}},
				{"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": ""}}
			]},
			{"role": "tool", "tool_call_id": "call_1", "content": "{\"found\":true}"},
			{"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "sunny"}]},
			{"role": "user", "content": "Thanks"}
		],
		"tools": [
			{"type": "function", "function": {"name": "lookup", "description": "Look up", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": false}}},
			{"type": "function", "function": {"name": "weather"}}
		],
		"tool_choice": {"type": "function", "function": {"name": "lookup"}},
		"temperature": 0.5, "top_p": 0.9, "top_k": 40,
		"max_tokens": 100, "max_completion_tokens": 200,
		"stop": ["END", "STOP"], "n": 2,
		"presence_penalty": 0.1, "frequency_penalty": 0.2, "seed": 7,
		"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}},
		"user": "u-1", "store": false, "parallel_tool_calls": true
	}`
	tr := translate(t, body)
	if tr.Model != "gemini-2.5-flash" || !tr.Stream || !tr.IncludeUsage {
		t.Fatalf("model %q, stream %v, include usage %v", tr.Model, tr.Stream, tr.IncludeUsage)
	}
	got, _ := json.Marshal(tr.Request)
	want := `{
		"systemInstruction": {"parts": [{"text": "Be brief."}, {"text": "Answer in French."}]},
		"contents": [
			{"role": "user", "parts": [
				{"text": "What is in these?"},
				{"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
				{"fileData": {"mimeType": "image/jpeg", "fileUri": "https://example.com/cat.jpg?size=2"}},
				{"inlineData": {"mimeType": "audio/wav", "data": "UklGRg=="}},
				{"inlineData": {"mimeType": "application/pdf", "data": "JVBERi0="}}
			]},
			{"role": "model", "parts": [
				{"text": "Let me look."},
				{"functionCall": {"id": "call_1", "name": "lookup", "args": {"q": "cat"}}, "thoughtSignature": "c2lnMQ=="},
				{"functionCall": {"id": "call_2", "name": "weather", "args": {}}}
			]},
			{"role": "user", "parts": [
				{"functionResponse": {"id": "call_1", "name": "lookup", "response": {"found": true}}},
				{"functionResponse": {"id": "call_2", "name": "weather", "response": {"content": "sunny"}}},
				{"text": "Thanks"}
			]}
		],
		"tools": [{"functionDeclarations": [
			{"name": "lookup", "description": "Look up", "parametersJsonSchema": {"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": false}},
			{"name": "weather"}
		]}],
		"toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["lookup"]}},
		"generationConfig": {
			"temperature": 0.5, "topP": 0.9, "topK": 40, "maxOutputTokens": 200,
			"stopSequences": ["END", "STOP"], "candidateCount": 2,
			"presencePenalty": 0.1, "frequencyPenalty": 0.2, "seed": 7,
			"responseMimeType": "application/json",
			"responseJsonSchema": {"type": "object", "properties": {"a": {"type": "integer"}}}
		}
	}`
	if jsontest.Canonical(t, got) != jsontest.Canonical(t, []byte(want)) {
		t.Fatalf("got  %s\nwant %s", jsontest.Canonical(t, got), jsontest.Canonical(t, []byte(want)))
	}
}

func TestFromChatSmallCases(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, want string
	}{
		{"plain", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`},
		{"max_tokens alone", `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`,
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":9}}`},
		{"stop as a string", `{"model":"m","stop":"x","messages":[{"role":"user","content":"hi"}]}`,
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"stopSequences":["x"]}}`},
		{"json_object", `{"model":"m","response_format":{"type":"json_object"},"messages":[{"role":"user","content":"hi"}]}`,
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"responseMimeType":"application/json"}}`},
		{"text format", `{"model":"m","response_format":{"type":"text"},"messages":[{"role":"user","content":"hi"}]}`,
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`},
		{"tool_choice auto", `{"model":"m","tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto","messages":[{"role":"user","content":"hi"}]}`,
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"f"}]}],"toolConfig":{"functionCallingConfig":{"mode":"AUTO"}}}`},
		{"tool_choice required", `{"model":"m","tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required","messages":[{"role":"user","content":"hi"}]}`,
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"f"}]}],"toolConfig":{"functionCallingConfig":{"mode":"ANY"}}}`},
		{"tool_choice none", `{"model":"m","tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none","messages":[{"role":"user","content":"hi"}]}`,
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"f"}]}],"toolConfig":{"functionCallingConfig":{"mode":"NONE"}}}`},
		{"legacy functions", `{"model":"m","functions":[{"name":"f","parameters":{"type":"object"}}],"function_call":{"name":"f"},"messages":[
			{"role":"user","content":"hi"},
			{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}},
			{"role":"function","name":"f","content":"done"}]}`,
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]},
				{"role":"model","parts":[{"functionCall":{"name":"f","args":{}},"thoughtSignature":"skip_thought_signature_validator"}]},
				{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"content":"done"}}}]}],
			  "tools":[{"functionDeclarations":[{"name":"f","parametersJsonSchema":{"type":"object"}}]}],
			  "toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["f"]}}}`},
		{"a lost signature gets the placeholder on the first call only", `{"model":"m","messages":[
			{"role":"user","content":"hi"},
			{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"g","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"a","content":"1"},{"role":"tool","tool_call_id":"b","content":"2"}]}`,
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]},
				{"role":"model","parts":[{"functionCall":{"id":"a","name":"f","args":{}},"thoughtSignature":"skip_thought_signature_validator"},{"functionCall":{"id":"b","name":"g","args":{}}}]},
				{"role":"user","parts":[{"functionResponse":{"id":"a","name":"f","response":{"content":"1"}}},{"functionResponse":{"id":"b","name":"g","response":{"content":"2"}}}]}]}`},
		{"empty assistant turns are dropped and user turns joined", `{"model":"m","messages":[
			{"role":"user","content":"a"},{"role":"assistant","content":""},{"role":"user","content":"b"}]}`,
			`{"contents":[{"role":"user","parts":[{"text":"a"},{"text":"b"}]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := json.Marshal(translate(t, tc.body).Request)
			if jsontest.Canonical(t, got) != jsontest.Canonical(t, []byte(tc.want)) {
				t.Fatalf("got  %s\nwant %s", jsontest.Canonical(t, got), jsontest.Canonical(t, []byte(tc.want)))
			}
		})
	}
}

func TestFromChatRefusesWhatItCannotSay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, param string
	}{
		{"not JSON", `{`, ""},
		{"no model", `{"messages":[{"role":"user","content":"hi"}]}`, "model"},
		{"no messages", `{"model":"m","messages":[]}`, "messages"},
		{"only a system message", `{"model":"m","messages":[{"role":"system","content":"x"}]}`, "messages"},
		{"unknown role", `{"model":"m","messages":[{"role":"robot","content":"x"}]}`, "messages[0].role"},
		{"logprobs", `{"model":"m","logprobs":true,"messages":[{"role":"user","content":"hi"}]}`, "logprobs"},
		{"audio output", `{"model":"m","modalities":["text","audio"],"messages":[{"role":"user","content":"hi"}]}`, "modalities"},
		{"built-in tool", `{"model":"m","tools":[{"type":"web_search"}],"messages":[{"role":"user","content":"hi"}]}`, "tools[0].type"},
		{"tool_choice without tools", `{"model":"m","tool_choice":"required","messages":[{"role":"user","content":"hi"}]}`, "tool_choice"},
		{"bad tool_choice", `{"model":"m","tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"sometimes","messages":[{"role":"user","content":"hi"}]}`, "tool_choice"},
		{"file by id", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}]}`, "messages[0].content[0].file"},
		{"bad data URL", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png,xyz"}}]}]}`, "messages[0].content[0].image_url.url"},
		{"ftp URL", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x/y.png"}}]}]}`, "messages[0].content[0].image_url.url"},
		{"image in a system message", `{"model":"m","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]},{"role":"user","content":"hi"}]}`, "messages[0].content[0].type"},
		{"result of no call", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"nope","content":"x"}]}`, "messages[1].tool_call_id"},
		{"arguments not JSON", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{oops"}}]}]}`, "messages[1].tool_calls[0].function.arguments"},
		{"unknown format", `{"model":"m","response_format":{"type":"grammar"},"messages":[{"role":"user","content":"hi"}]}`, "response_format.type"},
		{"bad stop", `{"model":"m","stop":3,"messages":[{"role":"user","content":"hi"}]}`, "stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromChat([]byte(tc.body))
			var re *RefusedError
			if !errors.As(err, &re) {
				t.Fatalf("err %v; want a *RefusedError", err)
			}
			if re.Param != tc.param {
				t.Fatalf("param %q (%v); want %q", re.Param, re, tc.param)
			}
		})
	}
}

func TestRequestOmitsWhatIsUnset(t *testing.T) {
	t.Parallel()
	got, _ := json.Marshal(translate(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`).Request)
	for _, key := range []string{"systemInstruction", "tools", "toolConfig", "generationConfig", "safetySettings"} {
		if bytes.Contains(got, []byte(key)) {
			t.Errorf("%s sent unset: %s", key, got)
		}
	}
}
