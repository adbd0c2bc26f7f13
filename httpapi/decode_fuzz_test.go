package httpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/weir-gateway/weir"
)

// endpoints are every route decodeRequest serves, indexed by the fuzzer.
var endpoints = []endpoint{epChat, epEmbeddings, epImages, epSpeech}

// FuzzDecodeRequest feeds decodeRequest arbitrary bodies for every
// endpoint. It must never panic; it either accepts a request or refuses it
// with invalid_request (400), never both or neither. An accepted request
// has a non-empty model, a positive token estimate no smaller than its
// max tokens or its body's share (saturating, never wrapped), every required field,
// and a body that re-encodes with the model replaced.
func FuzzDecodeRequest(f *testing.F) {
	seeds := []string{
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":16}`,
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":8,"max_tokens":99}`,
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":-1}`,
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":1e400}`,
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":9223372036854775807}`,
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":9223372036854775806,"max_tokens":1}`,
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":9223372036854775808}`,
		`{"model":"text-embedding-3-small","input":"x","max_tokens":9223372036854775807}`,
		`{"model":"gpt-4o-mini","messages":["hi"]}`,
		`{"model":"gpt-4o-mini","messages":[]}`,
		`{"model":"gpt-4o-mini","messages":{}}`,
		`{"model":"gpt-4o-mini","messages":null}`,
		`{"model":"gpt-4o-mini","stream":"yes","messages":[{}]}`,
		`{"model":"gpt-4o-mini","stream":null,"messages":[{}]}`,
		`{"model":"","messages":[{}]}`,
		`{"model":42,"messages":[{}]}`,
		`{"model":null}`,
		`{"model":"a","model":"b","messages":[{}]}`,
		`{"model":"0","mOdel":"","messages":[{}]}`,
		`{"model":"text-embedding-3-small","input":"hello"}`,
		`{"model":"text-embedding-3-small","input":["a","b"],"encoding_format":"base64","dimensions":8}`,
		`{"model":"text-embedding-3-small","input":[[1,2,3]]}`,
		`{"model":"text-embedding-3-small","input":""}`,
		`{"model":"text-embedding-3-small","input":"x","stream":false}`,
		`{"model":"gpt-image-1","prompt":"a weir","n":1,"size":"1024x1024"}`,
		`{"model":"gpt-image-1","prompt":null}`,
		`{"model":"tts-1","input":"Hello","voice":"alloy","response_format":"wav"}`,
		`{"model":"tts-1","input":"Hello"}`,
		`{"model":"tts-1","voice":"alloy","input":{}}`,
		`{"model":"\u0000","messages":[{"role":"user"}]}`,
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat("é", 64) + `"}]}`,
		`  {"model":"gpt-4o-mini","messages":[{}]}  `,
		`{"model":"gpt-4o-mini","messages":[{}]}{}`,
		`{"model":"gpt-4o-mini","messages":[`,
		`{}`,
		`[]`,
		`null`,
		`"model"`,
		``,
		"\xff\xfe{",
	}
	for _, s := range seeds {
		for i := range endpoints {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		ep := endpoints[int(which)%len(endpoints)]
		req, aerr := decodeRequest(ep, body)
		if (req == nil) == (aerr == nil) {
			t.Fatalf("decodeRequest(%s, %q) = %v, %v: want exactly one of a request and an error", ep.name, body, req, aerr)
		}
		if aerr != nil {
			if aerr.Code != weir.CodeInvalidRequest || aerr.Code.Status() != 400 || aerr.Message == "" {
				t.Fatalf("decodeRequest(%s, %q) refused with %+v, want invalid_request (400) with a message", ep.name, body, aerr)
			}
			return
		}
		if req.model == "" || len(req.model) > maxModelName {
			t.Fatalf("decodeRequest(%s, %q) accepted a request without a model, or with one too long", ep.name, body)
		}
		// The estimate covers the prompt (a token at least) and the
		// answer's tokens, however large the client's numbers: it
		// saturates, never wraps.
		if req.wants.PromptTokens < 1 || req.maxTokens < 0 || req.estimate < req.maxTokens || req.estimate < req.wants.PromptTokens {
			t.Fatalf("decodeRequest(%s, %q): estimate %d, max tokens %d", ep.name, body, req.estimate, req.maxTokens)
		}
		if req.stream && ep.kind != weir.KindChat {
			t.Fatalf("decodeRequest(%s, %q) accepted a stream for %s", ep.name, body, ep.kind)
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(req.body, &raw); err != nil {
			t.Fatalf("decodeRequest(%s, %q) accepted a body that is not a JSON object: %v", ep.name, body, err)
		}
		for _, field := range ep.required {
			if v, ok := raw[field]; !ok || isEmptyJSON(v) {
				t.Fatalf("decodeRequest(%s, %q) accepted a request without %s", ep.name, body, field)
			}
		}
		out, err := req.withModel("upstream-model")
		if err != nil {
			t.Fatalf("withModel after decodeRequest(%s, %q): %v", ep.name, body, err)
		}
		var back struct {
			Model string `json:"model"`
		}
		if err := json.Unmarshal(out, &back); err != nil || back.Model != "upstream-model" {
			t.Fatalf("withModel after decodeRequest(%s, %q) = %s (%v): want the body with model upstream-model", ep.name, body, out, err)
		}
		again, aerr := decodeRequest(ep, out)
		if aerr != nil || again.model != "upstream-model" || again.stream != req.stream || again.maxTokens != req.maxTokens {
			t.Fatalf("the re-encoded body %s decodes as %+v, %v; want the same request with the new model", out, again, aerr)
		}
	})
}
