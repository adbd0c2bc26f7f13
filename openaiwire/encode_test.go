package openaiwire

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzChatRequestAppendJSON: AppendJSON writes what json.Marshal writes
// of any request a body decodes to.
func FuzzChatRequestAppendJSON(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi <b> & \u2028"}]}`,
		`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"u"}}]},
			{"role":"assistant","content":null,"refusal":"r","tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f","arguments":"{}"},"extra_content":{"a": 1}}],"reasoning_content":"t"},
			{"role":"tool","tool_call_id":"c","content":"o","name":"n","function_call":{"arguments":""}}],
			"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"auto","parallel_tool_calls":false,
			"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{}}},"max_tokens":1,"max_completion_tokens":2,"temperature":0.2,"top_p":1e-9,"top_k":3,
			"stop":["a"],"frequency_penalty":-1.5,"presence_penalty":1e21,"seed":-4,"stream":true,"stream_options":{"include_usage":true},"user":"u","reasoning_effort":"low",
			"verbosity":"high","service_tier":"flex","prompt_cache_key":"k","prompt_cache_retention":"24h","safety_identifier":"s","n":2,"logprobs":true,"top_logprobs":3,
			"modalities":["text"],"functions":[{"name":"g"}],"function_call":"auto","audio":{"voice":"x"},"prediction":{"type":"content"}}`,
		`{}`, `{"messages":[]}`, `{"messages":[{}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var c ChatRequest
		if json.Unmarshal(body, &c) != nil {
			return
		}
		want, werr := json.Marshal(&c)
		got, gerr := c.Marshal()
		if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("%q:\nAppendJSON %s, %v\njson.Marshal %s, %v", body, got, gerr, want, werr)
		}
	})
}
