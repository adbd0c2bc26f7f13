package anthropic

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzUnmarshalRequest: unmarshalRequest decodes what json.Unmarshal
// decodes, to the same request, and refuses what it refuses, with the
// same error.
func FuzzUnmarshalRequest(f *testing.F) {
	for _, s := range []string{
		benchRequest, benchConversation,
		`{"model":"m","max_tokens":1,"system":[{"type":"text","text":"s"}],"messages":[null,{"role":"user","content":null,"x":1}],"stream":true,
			"stop_sequences":["a"],"top_p":0.5,"top_k":3,"thinking":{"type":"disabled"},"metadata":null,"tool_choice":{"type":"any"}}`,
		`{"Model":"m"}`, `{"model":"m","model":"n"}`, `{"messages":[{"role":"user","content":5}]}`, `{"max_tokens":1.5}`,
		`null`, `[]`, `{"model":"m"} x`, `{"messages":[{"ROLE":"user"}]}`,
		`{"messages":[{"role":"user","content":[null,{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}],"is_error":false},
			{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA==","Url":1}},{"type":"tool_result","content":"s"}]}],"system":"sys"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var got, want Request
		gerr := unmarshalRequest(body, &got)
		werr := json.Unmarshal(body, &want)
		if (gerr == nil) != (werr == nil) || (werr != nil && gerr.Error() != werr.Error()) || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: %+v, %v; json.Unmarshal %+v, %v", body, got, gerr, want, werr)
		}
	})
}
