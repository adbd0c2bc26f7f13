package mock

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// structuredSchemas are the schemas a structured-output client sends, as
// Vercel's generateObject (zod through zod-to-json-schema), LangChain's
// withStructuredOutput (pydantic, with $defs) and hand-written ones do.
var structuredSchemas = []struct {
	name, schema string
}{
	{"flat", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","additionalProperties":false,
		"properties":{"name":{"type":"string"},"age":{"type":"integer"},"score":{"type":"number"},"ok":{"type":"boolean"}},
		"required":["name","age","score","ok"]}`},
	{"nested", `{"type":"object","properties":{"recipe":{"type":"object","properties":{
		"name":{"type":"string"},
		"ingredients":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"amount":{"type":"string"}},"required":["name","amount"],"additionalProperties":false}},
		"steps":{"type":"array","items":{"type":"string"}}},
		"required":["name","ingredients","steps"],"additionalProperties":false}},"required":["recipe"],"additionalProperties":false}`},
	{"enums and nulls", `{"type":"object","properties":{
		"mood":{"type":"string","enum":["happy","sad"]},
		"kind":{"const":"weir"},
		"note":{"anyOf":[{"type":"string"},{"type":"null"}]},
		"count":{"type":["integer","null"]},
		"first_null":{"anyOf":[{"type":"null"},{"type":"number"}]}},
		"required":["mood","kind","note","count","first_null"]}`},
	{"pydantic $defs", `{"$defs":{"Step":{"properties":{"explanation":{"title":"Explanation","type":"string"},"output":{"title":"Output","type":"string"}},
		"required":["explanation","output"],"title":"Step","type":"object"}},
		"properties":{"steps":{"items":{"$ref":"#/$defs/Step"},"title":"Steps","type":"array"},"final_answer":{"title":"Final Answer","type":"string"}},
		"required":["steps","final_answer"],"title":"MathReasoning","type":"object"}`},
	{"recursive $defs", `{"type":"object","properties":{"root":{"$ref":"#/$defs/node"}},"required":["root"],
		"$defs":{"node":{"type":"object","properties":{"label":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["label","children"]}}}`},
	{"recursive root", `{"type":"object","properties":{"name":{"type":"string"},"child":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["name","child"]}`},
	{"bounds and formats", `{"type":"object","properties":{
		"i":{"type":"integer","minimum":10,"maximum":20,"multipleOf":5},
		"neg":{"type":"integer","maximum":-3},
		"x":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1},
		"big":{"type":"number","minimum":100},
		"long":{"type":"string","minLength":100},
		"short":{"type":"string","maxLength":5},
		"when":{"type":"string","format":"date-time"},
		"day":{"type":"string","format":"date"},
		"mail":{"type":"string","format":"email"},
		"three":{"type":"array","items":{"type":"integer"},"minItems":3,"maxItems":3},
		"none":{"type":"array","items":{"type":"string"},"maxItems":0}},
		"required":["i","neg","x","big","long","short","when","day","mail","three","none"]}`},
	{"allOf", `{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"properties":{"b":{"type":"boolean"}},"required":["b"]}]}`},
	{"tuple", `{"type":"object","properties":{"pair":{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false}},"required":["pair"]}`},
	{"vercel array output", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"elements":{"type":"array","items":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}},"required":["elements"],"additionalProperties":false}`},
	{"vercel enum output", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"result":{"type":"string","enum":["sunny","rainy","snowy"]}},"required":["result"],"additionalProperties":false}`},
	{"untyped", `{"properties":{"anything":{},"list":{"items":{"type":"integer"}}},"required":["anything","list"]}`},
}

// A fixed clock, so that two answers to one schema (date-times included)
// are the same.
func fixedClock(s *Server) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	s.now = func() time.Time { return at }
}

func jsonSchemaFormat(name, schema string) map[string]any {
	return map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": name, "strict": true, "schema": json.RawMessage(schema)}}
}

// TestStructuredOutput: for each schema, the answer's content parses as
// JSON of the schema's shape, finished "stop", and the streamed content
// concatenated is the same JSON, split over several chunks.
func TestStructuredOutput(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, Config{}, fixedClock)
	for _, tc := range structuredSchemas {
		t.Run(tc.name, func(t *testing.T) {
			var schema any
			if err := json.Unmarshal([]byte(tc.schema), &schema); err != nil {
				t.Fatal(err)
			}
			body := chatWith(map[string]any{"response_format": jsonSchemaFormat("answer", tc.schema)})
			m := obj(t, expectStatus(t, f.post("/v1/chat/completions", body, nil), http.StatusOK))
			ch := m["choices"].([]any)[0].(map[string]any)
			content, _ := ch["message"].(map[string]any)["content"].(string)
			if ch["finish_reason"] != "stop" {
				t.Errorf("finish_reason %v", ch["finish_reason"])
			}
			var v any
			if err := json.Unmarshal([]byte(content), &v); err != nil {
				t.Fatalf("content is not JSON: %v\n%s", err, content)
			}
			if err := fits(schema, schema, v, "$"); err != nil {
				t.Errorf("content does not fit the schema: %v\n%s", err, content)
			}
			if got, want := m["usage"].(map[string]any)["completion_tokens"], float64(estimateTokens(len(content))); got != want {
				t.Errorf("completion_tokens %v for %d bytes, want %v", got, len(content), want)
			}

			body["stream"] = true
			chunks := streamChunks(t, f.post("/v1/chat/completions", body, nil))
			var streamed strings.Builder
			pieces := 0
			for _, c := range chunks {
				choice := c["choices"].([]any)[0].(map[string]any)
				if s, _ := choice["delta"].(map[string]any)["content"].(string); s != "" {
					streamed.WriteString(s)
					pieces++
				}
			}
			if streamed.String() != content {
				t.Errorf("streamed %s\nwhole    %s", streamed.String(), content)
			}
			if pieces < 2 {
				t.Errorf("the JSON came in %d chunks", pieces)
			}
			if fr := chunks[len(chunks)-1]["choices"].([]any)[0].(map[string]any)["finish_reason"]; fr != "stop" {
				t.Errorf("stream finish_reason %v", fr)
			}
		})
	}
}

// TestJSONObject: response_format json_object answers a JSON object, whole
// or streamed.
func TestJSONObject(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	body := chatWith(map[string]any{"response_format": map[string]any{"type": "json_object"}})
	m := obj(t, expectStatus(t, f.post("/v1/chat/completions", body, nil), http.StatusOK))
	content := m["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	if o := obj(t, []byte(content)); len(o) == 0 {
		t.Errorf("content %s: an empty object", content)
	}
	body["stream"] = true
	var streamed strings.Builder
	for _, c := range streamChunks(t, f.post("/v1/chat/completions", body, nil)) {
		s, _ := c["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)["content"].(string)
		streamed.WriteString(s)
	}
	if streamed.String() != content {
		t.Errorf("streamed %s, whole %s", streamed.String(), content)
	}
}

// TestForcedToolCall: a tool_choice that names a function (or "required")
// is answered with a call of it, whose arguments fit its parameters,
// whole or streamed (the arguments split over chunks after one naming the
// call), finished "tool_calls".
func TestForcedToolCall(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, Config{}, fixedClock)
	weather := `{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["c","f"]},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","unit","days"]}`
	tools := []map[string]any{
		{"type": "function", "function": map[string]any{"name": "lookup", "parameters": json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)}},
		{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": json.RawMessage(weather)}},
	}
	for _, tc := range []struct {
		choice any
		name   string
	}{
		{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}, "get_weather"},
		{"required", "lookup"},
	} {
		var schema any
		for _, tool := range tools {
			if fn := tool["function"].(map[string]any); fn["name"] == tc.name {
				_ = json.Unmarshal(fn["parameters"].(json.RawMessage), &schema)
			}
		}
		body := chatWith(map[string]any{"tools": tools, "tool_choice": tc.choice})
		m := obj(t, expectStatus(t, f.post("/v1/chat/completions", body, nil), http.StatusOK))
		ch := m["choices"].([]any)[0].(map[string]any)
		msg := ch["message"].(map[string]any)
		calls, _ := msg["tool_calls"].([]any)
		if ch["finish_reason"] != "tool_calls" || msg["content"] != nil || len(calls) != 1 {
			t.Fatalf("%s: finish %v, content %v, calls %v", tc.name, ch["finish_reason"], msg["content"], msg["tool_calls"])
		}
		call := calls[0].(map[string]any)
		fn := call["function"].(map[string]any)
		if id, _ := call["id"].(string); !strings.HasPrefix(id, "call_") || call["type"] != "function" || fn["name"] != tc.name {
			t.Errorf("%s: call %v", tc.name, call)
		}
		args, _ := fn["arguments"].(string)
		var v any
		if err := json.Unmarshal([]byte(args), &v); err != nil {
			t.Fatalf("%s: arguments are not JSON: %v: %s", tc.name, err, args)
		}
		if err := fits(schema, schema, v, "$"); err != nil {
			t.Errorf("%s: arguments %s do not fit: %v", tc.name, args, err)
		}

		body["stream"] = true
		chunks := streamChunks(t, f.post("/v1/chat/completions", body, nil))
		first := chunks[0]["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
		firstCall := first["tool_calls"].([]any)[0].(map[string]any)
		if first["role"] != "assistant" || firstCall["function"].(map[string]any)["name"] != tc.name || firstCall["id"] == nil {
			t.Errorf("%s: first chunk %v", tc.name, first)
		}
		var streamed strings.Builder
		for _, c := range chunks[1 : len(chunks)-1] {
			d := c["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
			tcs, _ := d["tool_calls"].([]any)
			if len(tcs) != 1 || tcs[0].(map[string]any)["index"] != 0.0 {
				t.Fatalf("%s: chunk delta %v", tc.name, d)
			}
			streamed.WriteString(tcs[0].(map[string]any)["function"].(map[string]any)["arguments"].(string))
		}
		if streamed.String() != args {
			t.Errorf("%s: streamed arguments %s, whole %s", tc.name, streamed.String(), args)
		}
		if fr := chunks[len(chunks)-1]["choices"].([]any)[0].(map[string]any)["finish_reason"]; fr != "tool_calls" {
			t.Errorf("%s: stream finish_reason %v", tc.name, fr)
		}
	}

	// tool_choice auto (or none) leaves the model to answer in text.
	m := obj(t, expectStatus(t, f.post("/v1/chat/completions", chatWith(map[string]any{"tools": tools, "tool_choice": "auto"}), nil), http.StatusOK))
	if ch := m["choices"].([]any)[0].(map[string]any); ch["finish_reason"] != "stop" || ch["message"].(map[string]any)["content"] == nil {
		t.Errorf("auto: %v", ch)
	}
}

// TestStructuredCut: max_tokens below the JSON's length cuts it, and says
// so: finish_reason "length".
func TestStructuredCut(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	body := chatWith(map[string]any{"response_format": jsonSchemaFormat("a", structuredSchemas[1].schema), "max_tokens": 3})
	m := obj(t, expectStatus(t, f.post("/v1/chat/completions", body, nil), http.StatusOK))
	ch := m["choices"].([]any)[0].(map[string]any)
	content := ch["message"].(map[string]any)["content"].(string)
	if ch["finish_reason"] != "length" || len(content) > 12 || !strings.HasPrefix(content, `{"`) {
		t.Errorf("finish %v, content %q", ch["finish_reason"], content)
	}
}

// TestStructuredErrors: what OpenAI refuses, the mock refuses with 400.
func TestStructuredErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	fn := []map[string]any{{"type": "function", "function": map[string]any{"name": "f"}}}
	for _, tc := range []struct {
		name  string
		extra map[string]any
		param string
	}{
		{"unknown type", map[string]any{"response_format": map[string]any{"type": "yaml"}}, "response_format.type"},
		{"no json_schema", map[string]any{"response_format": map[string]any{"type": "json_schema"}}, "response_format.json_schema"},
		{"no name", map[string]any{"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"schema": map[string]any{}}}}, "response_format.json_schema.name"},
		{"schema not an object", map[string]any{"response_format": jsonSchemaFormat("a", `[1]`)}, "response_format.json_schema.schema"},
		{"required without tools", map[string]any{"tool_choice": "required"}, "tool_choice"},
		{"unknown function", map[string]any{"tools": fn, "tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "g"}}}, "tool_choice"},
		{"unknown mode", map[string]any{"tools": fn, "tool_choice": "always"}, "tool_choice"},
	} {
		e := expectError(t, f.post("/v1/chat/completions", chatWith(tc.extra), nil), http.StatusBadRequest, "invalid_request_error")
		if e["param"] != tc.param {
			t.Errorf("%s: param %v, want %s", tc.name, e["param"], tc.param)
		}
	}
}

// fits checks v against the shape schema asks for (root resolves $ref):
// types, properties (required, no others with additionalProperties
// false), items and tuples, enum, const, bounds, lengths, anyOf, oneOf,
// allOf and the formats the mock fills. It is the tests' own reading of
// JSON Schema, kept apart from the generator's.
func fits(schema, root, v any, at string) error {
	if b, ok := schema.(bool); ok {
		if !b {
			return fmt.Errorf("%s: the schema false takes nothing", at)
		}
		return nil
	}
	s, ok := schema.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: schema %v", at, schema)
	}
	if ref, ok := s["$ref"].(string); ok {
		target := root
		for _, part := range strings.Split(strings.TrimPrefix(strings.TrimPrefix(ref, "#"), "/"), "/") {
			if part != "" {
				target = target.(map[string]any)[part]
			}
		}
		return fits(target, root, v, at)
	}
	if c, ok := s["const"]; ok && fmt.Sprint(c) != fmt.Sprint(v) {
		return fmt.Errorf("%s: %v, want const %v", at, v, c)
	}
	if e, ok := s["enum"].([]any); ok && !slices.ContainsFunc(e, func(x any) bool { return fmt.Sprint(x) == fmt.Sprint(v) }) {
		return fmt.Errorf("%s: %v not in enum %v", at, v, e)
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if bs, ok := s[k].([]any); ok {
			var errs []string
			for _, b := range bs {
				if err := fits(b, root, v, at); err != nil {
					errs = append(errs, err.Error())
				}
			}
			if len(errs) == len(bs) {
				return fmt.Errorf("%s: no branch of %s fits: %s", at, k, strings.Join(errs, "; "))
			}
		}
	}
	if bs, ok := s["allOf"].([]any); ok {
		for _, b := range bs {
			if err := fits(b, root, v, at); err != nil {
				return err
			}
		}
	}
	var types []string
	switch t := s["type"].(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			types = append(types, x.(string))
		}
	}
	if len(types) > 0 && !slices.Contains(types, typeOf(v)) && !(typeOf(v) == "integer" && slices.Contains(types, "number")) {
		return fmt.Errorf("%s: %v is %s, want %v", at, v, typeOf(v), types)
	}
	switch x := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		for _, r := range req {
			if _, ok := x[r.(string)]; !ok {
				return fmt.Errorf("%s: required %q missing", at, r)
			}
		}
		for k, pv := range x {
			ps, listed := props[k]
			if !listed {
				if s["additionalProperties"] == false {
					return fmt.Errorf("%s: %q is not a listed property", at, k)
				}
				continue
			}
			if err := fits(ps, root, pv, at+"."+k); err != nil {
				return err
			}
		}
	case []any:
		if n, ok := s["minItems"].(float64); ok && float64(len(x)) < n {
			return fmt.Errorf("%s: %d items, minItems %v", at, len(x), n)
		}
		if n, ok := s["maxItems"].(float64); ok && float64(len(x)) > n {
			return fmt.Errorf("%s: %d items, maxItems %v", at, len(x), n)
		}
		prefix, _ := s["prefixItems"].([]any)
		for i, item := range x {
			is := s["items"]
			if i < len(prefix) {
				is = prefix[i]
			}
			if is == nil {
				continue
			}
			if err := fits(is, root, item, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	case string:
		n := float64(utf8.RuneCountInString(x))
		if m, ok := s["minLength"].(float64); ok && n < m {
			return fmt.Errorf("%s: %q shorter than %v", at, x, m)
		}
		if m, ok := s["maxLength"].(float64); ok && n > m {
			return fmt.Errorf("%s: %q longer than %v", at, x, m)
		}
		switch s["format"] {
		case "date-time":
			if _, err := time.Parse(time.RFC3339, x); err != nil {
				return fmt.Errorf("%s: %q is no date-time", at, x)
			}
		case "date":
			if _, err := time.Parse(time.DateOnly, x); err != nil {
				return fmt.Errorf("%s: %q is no date", at, x)
			}
		case "email":
			if !strings.Contains(x, "@") {
				return fmt.Errorf("%s: %q is no email", at, x)
			}
		}
	case float64:
		if m, ok := s["minimum"].(float64); ok && x < m {
			return fmt.Errorf("%s: %v below %v", at, x, m)
		}
		if m, ok := s["maximum"].(float64); ok && x > m {
			return fmt.Errorf("%s: %v above %v", at, x, m)
		}
		if m, ok := s["exclusiveMinimum"].(float64); ok && x <= m {
			return fmt.Errorf("%s: %v not above %v", at, x, m)
		}
		if m, ok := s["exclusiveMaximum"].(float64); ok && x >= m {
			return fmt.Errorf("%s: %v not below %v", at, x, m)
		}
		if m, ok := s["multipleOf"].(float64); ok && math.Mod(x, m) != 0 {
			return fmt.Errorf("%s: %v not a multiple of %v", at, x, m)
		}
	}
	return nil
}

func typeOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case float64:
		if x == math.Trunc(x) {
			return "integer"
		}
		return "number"
	}
	return fmt.Sprintf("%T", v)
}
