package httpapi

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzScanFields: where scanFields reads a body, it reads what
// encoding/json reads into a map, and withModel splices at its spans what
// the parsing withModel finds; where encoding/json refuses a body,
// scanFields does too. The value decoders agree with json.Unmarshal.
func FuzzScanFields(f *testing.F) {
	for _, s := range []string{
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"a","MODEL":"b","Model":"c","messages":[{}],"max_tokens":12}`,
		`{"model" : "a" , "n" : 1e3, "stream":true, "user":"\u00e9", "size":"x"}`,
		`{"mod\u0065l":"a","messages":[]}`,
		`{"model":"a","messages":[[[[]]]],"tools":[{}],"functions":null}`,
		`{"model":"a","max_tokens":-0,"max_completion_tokens":9223372036854775808}`,
		`{"model":"\ud800","input":"\xff","voice":7,"quality":null}`,
		`{"model":"a"}{}`, `{"model":"a",}`, `{"a":01}`, `{"a":"\x01"}`, `[]`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		body = bytes.TrimSpace(body)
		got, ok := scanFields(body)
		want, err := readFields(body)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("scanFields read %q, which encoding/json refuses: %v", body, err)
		}
		models := got.models
		got.models = modelSpans{}
		if !fieldsEqual(got, want) {
			t.Fatalf("scanFields(%q) = %+v, encoding/json %+v", body, got, want)
		}
		for _, v := range [][]byte{got.model, got.stream, got.maxTokens, got.n, got.user, got.input} {
			if v == nil {
				continue
			}
			var s string
			js, jok := jsonString(v)
			if serr := json.Unmarshal(v, &s); jok != (serr == nil) || jok && js != s {
				t.Fatalf("jsonString(%s) = %q, %v; json.Unmarshal %q, %v", v, js, jok, s, serr)
			}
			var n int64
			jn, nok := jsonInt64(v)
			if nerr := json.Unmarshal(v, &n); nok != (nerr == nil) || nok && jn != n {
				t.Fatalf("jsonInt64(%s) = %d, %v; json.Unmarshal %d, %v", v, jn, nok, n, nerr)
			}
			var b bool
			jb, bok := jsonBool(v)
			if berr := json.Unmarshal(v, &b); bok != (berr == nil) || bok && jb != b {
				t.Fatalf("jsonBool(%s) = %v, %v; json.Unmarshal %v, %v", v, jb, bok, b, berr)
			}
		}
		if !models.known {
			return
		}
		for _, up := range []string{"up", "u\"p<\xff>"} {
			spliced := (&request{body: body, models: models}).withModel
			parsed := (&request{body: body}).withModel
			g, gerr := spliced(up)
			w, werr := parsed(up)
			if gerr != nil || werr != nil || !bytes.Equal(g, w) {
				t.Fatalf("withModel(%q) of %q at the spans %+v = %s, %v; parsing it: %s, %v", up, body, models, g, gerr, w, werr)
			}
		}
	})
}

func fieldsEqual(a, b fields) bool {
	as, bs := a.all(), b.all()
	for i := range as {
		if (as[i] == nil) != (bs[i] == nil) || !bytes.Equal(as[i], bs[i]) {
			return false
		}
	}
	return true
}

func (f *fields) all() [][]byte {
	return [][]byte{f.model, f.stream, f.maxCompletionTokens, f.maxTokens, f.messages, f.tools, f.functions,
		f.responseFormat, f.size, f.voice, f.quality, f.n, f.input, f.prompt, f.promptCacheKey, f.user}
}
