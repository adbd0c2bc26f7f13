package mock

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// A structured answer is JSON: the content asked for by response_format
// ("json_object": an object; "json_schema": a value of its schema's
// shape), or the arguments of a tool call forced by tool_choice. It is
// sent as tokens of about four bytes each, so a stream carries the JSON
// split across chunks and their concatenation is the whole.

// responseFormat is a chat request's response_format.
type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
	} `json:"json_schema"`
}

// chatTool is one of a chat request's tools.
type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// forcedTool is the tool that tool_choice makes the answer call: the one
// it names, or the first with "required"; nil when the model may answer
// in text ("auto", "none", absent), as the mock then does.
func forcedTool(choice json.RawMessage, tools []chatTool) (*chatTool, *apiError) {
	if len(choice) == 0 || string(choice) == "null" {
		return nil, nil
	}
	var mode string
	if json.Unmarshal(choice, &mode) == nil {
		switch mode {
		case "auto", "none":
			return nil, nil
		case "required":
			if len(tools) == 0 {
				e := invalidRequest("tool_choice", "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.")
				return nil, &e
			}
			return &tools[0], nil
		}
		e := invalidRequest("tool_choice", "Invalid value: '"+mode+"'. Supported values are: 'none', 'auto', and 'required'.")
		return nil, &e
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(choice, &named); err != nil {
		e := invalidRequest("tool_choice", "Invalid 'tool_choice': "+err.Error())
		return nil, &e
	}
	if named.Type != "function" {
		return nil, nil // allowed_tools and custom tools: the model may answer in text
	}
	for i := range tools {
		if tools[i].Function.Name == named.Function.Name {
			return &tools[i], nil
		}
	}
	e := invalidRequest("tool_choice", "Invalid value for 'tool_choice': function '"+named.Function.Name+"' not found in 'tools'.")
	return nil, &e
}

// structure makes r the JSON a request asks for (see structuredJSON), if
// it asks for JSON.
func (r *reply) structure(rf *responseFormat, tool *chatTool, now func() time.Time) *apiError {
	js, apiErr := structuredJSON(rf, tool, r.text, now)
	if apiErr != nil {
		return apiErr
	}
	if js != nil {
		r.pieces = jsonTokens(js)
		r.tokens = len(r.pieces)
	}
	return nil
}

// structuredJSON is the JSON a request asks for, or nil for a text
// answer: the arguments of the forced tool, or the content that
// response_format asks for. text is the answer the request would get in
// text, for a JSON object with no schema; now dates date-times.
func structuredJSON(rf *responseFormat, tool *chatTool, text textAnswer, now func() time.Time) ([]byte, *apiError) {
	var schema json.RawMessage
	switch {
	case tool != nil:
		schema = tool.Function.Parameters
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
	case rf == nil || rf.Type == "" || rf.Type == "text":
		return nil, nil
	case rf.Type == "json_object":
		return marshalAnswer(map[string]any{"answer": text.String()}), nil
	case rf.Type == "json_schema":
		if rf.JSONSchema == nil {
			e := invalidRequest("response_format.json_schema", "Missing required parameter: 'response_format.json_schema'.")
			return nil, &e
		}
		if rf.JSONSchema.Name == "" {
			e := invalidRequest("response_format.json_schema.name", "Missing required parameter: 'response_format.json_schema.name'.")
			return nil, &e
		}
		schema = rf.JSONSchema.Schema
		if len(schema) == 0 || string(schema) == "null" {
			return marshalAnswer(map[string]any{"answer": text.String()}), nil
		}
	default:
		e := invalidRequest("response_format.type", "Invalid value: '"+rf.Type+"'. Supported values are: 'json_object', 'json_schema', and 'text'.")
		return nil, &e
	}
	var root any
	if err := json.Unmarshal(schema, &root); err != nil {
		e := invalidRequest("response_format.json_schema.schema", "Invalid schema: "+err.Error())
		return nil, &e
	}
	if _, ok := root.(map[string]any); !ok {
		e := invalidRequest("response_format.json_schema.schema", "Invalid schema: a JSON Schema is an object.")
		return nil, &e
	}
	s := &shaper{root: root, now: now()}
	return marshalAnswer(s.value(root, 0)), nil
}

func marshalAnswer(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // decoded JSON and plain values: cannot fail
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// jsonTokens splits js into tokens of about four bytes (the mock's
// tokenizer), never inside a UTF-8 character.
func jsonTokens(js []byte) []string {
	var out []string
	for len(js) > 0 {
		n := min(4, len(js))
		for n < len(js) && !utf8.RuneStart(js[n]) {
			n++
		}
		out = append(out, string(js[:n]))
		js = js[n:]
	}
	return out
}

// shaper makes a value of a JSON Schema's shape: objects with their
// properties, arrays, strings (formats and lengths), numbers and integers
// within their bounds, booleans, enums and consts, nested; a local $ref
// followed, anyOf and oneOf by their first branch that is not null, allOf
// merged. What it cannot honour (a pattern, say) it leaves alone.
type shaper struct {
	root  any
	now   time.Time
	texts int // the sentence the next string says
}

const (
	// fullDepth is how deep objects get all their properties and arrays
	// an item; past it only what is required, so that a recursive schema
	// ends.
	fullDepth = 6
	// maxDepth stops a schema that requires itself without end.
	maxDepth = 32
)

func (g *shaper) value(s any, depth int) any {
	if depth > maxDepth {
		return nil
	}
	m, ok := s.(map[string]any)
	if !ok {
		if b, isBool := s.(bool); isBool && !b {
			return nil // the schema false: nothing fits
		}
		return g.text(nil) // true: anything fits
	}
	if ref, ok := m["$ref"].(string); ok {
		if target, ok := g.resolve(ref); ok {
			return g.value(target, depth+1)
		}
	}
	if c, ok := m["const"]; ok {
		return c
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if branches, ok := m[k].([]any); ok && len(branches) > 0 {
			b := g.firstNotNull(branches)
			if depth >= fullDepth && g.allowsNull(branches) {
				b = map[string]any{"type": "null"} // a recursive schema ends here
			}
			return g.value(b, depth+1)
		}
	}
	if all, ok := m["allOf"].([]any); ok && len(all) > 0 {
		m = g.merge(m, all)
	}
	switch schemaType(m) {
	case "object":
		return g.object(m, depth)
	case "array":
		return g.array(m, depth)
	case "integer":
		return integerIn(m)
	case "number":
		return numberIn(m)
	case "boolean":
		return true
	case "null":
		return nil
	default:
		return g.text(m)
	}
}

// schemaType is the type a schema asks for: its type (the first not
// "null" of a list), or what its keywords imply.
func schemaType(m map[string]any) string {
	switch t := m["type"].(type) {
	case string:
		return t
	case []any:
		for _, e := range t {
			if s, ok := e.(string); ok && s != "null" {
				return s
			}
		}
		if len(t) > 0 {
			return "null"
		}
	}
	has := func(keys ...string) bool {
		for _, k := range keys {
			if _, ok := m[k]; ok {
				return true
			}
		}
		return false
	}
	switch {
	case has("properties", "required", "additionalProperties"):
		return "object"
	case has("items", "prefixItems", "minItems", "maxItems"):
		return "array"
	case has("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
		return "number"
	}
	return "string"
}

func (g *shaper) object(m map[string]any, depth int) any {
	props, _ := m["properties"].(map[string]any)
	out := map[string]any{}
	if depth < fullDepth {
		for _, name := range slices.Sorted(maps.Keys(props)) { // the same answer each time
			out[name] = g.value(props[name], depth+1)
		}
	}
	req, _ := m["required"].([]any)
	for _, r := range req {
		name, ok := r.(string)
		if _, done := out[name]; !ok || done {
			continue
		}
		p, listed := props[name]
		if !listed {
			p = true
		}
		out[name] = g.value(p, depth+1)
	}
	return out
}

func (g *shaper) array(m map[string]any, depth int) any {
	// A tuple: prefixItems (or, before 2020-12, items as a list), then
	// items (additionalItems) for the rest; absent, anything.
	prefix, _ := m["prefixItems"].([]any)
	rest := m["items"]
	if list, ok := rest.([]any); ok {
		prefix, rest = list, m["additionalItems"]
	}
	if rest == nil {
		rest = true
	}
	out := []any{}
	for _, p := range prefix {
		out = append(out, g.value(p, depth+1))
	}
	n := len(out)
	if rest != false {
		if n == 0 && depth < fullDepth {
			n = 1
		}
		if minItems, ok := intKeyword(m, "minItems"); ok {
			n = max(n, minItems)
		}
	}
	if maxItems, ok := intKeyword(m, "maxItems"); ok {
		n = min(n, maxItems)
		out = out[:min(len(out), n)]
	}
	for len(out) < n {
		out = append(out, g.value(rest, depth+1))
	}
	return out
}

// text is a string for m: its format's, else a sentence of the answer's
// kind, within minLength and maxLength.
func (g *shaper) text(m map[string]any) string {
	format, _ := m["format"].(string)
	var s string
	switch format {
	case "date-time":
		s = g.now.UTC().Format(time.RFC3339)
	case "date":
		s = g.now.UTC().Format(time.DateOnly)
	case "time":
		s = g.now.UTC().Format("15:04:05Z")
	case "duration":
		s = "PT1M"
	case "email", "idn-email":
		s = "mock@example.com"
	case "hostname", "idn-hostname":
		s = "example.com"
	case "ipv4":
		s = "127.0.0.1"
	case "ipv6":
		s = "::1"
	case "uri", "iri", "url", "uri-reference", "iri-reference":
		s = "https://example.com/mock"
	case "uuid":
		s = "00000000-0000-4000-8000-000000000000"
	default:
		s = g.sentence()
	}
	minLen, hasMin := intKeyword(m, "minLength")
	for hasMin && utf8.RuneCountInString(s) < minLen {
		s += " " + g.sentence()
	}
	if maxLen, ok := intKeyword(m, "maxLength"); ok && utf8.RuneCountInString(s) > maxLen {
		s = strings.TrimRight(string([]rune(s)[:maxLen]), " ")
		for utf8.RuneCountInString(s) < minLen { // the trim took a space minLength needed
			s += "."
		}
	}
	return s
}

func (g *shaper) sentence() string {
	s := strings.Join(sentences[g.texts%len(sentences)], " ")
	g.texts++
	return s
}

// integerIn is 1, or the nearest integer to it within m's bounds, a
// multiple of its multipleOf.
func integerIn(m map[string]any) any {
	lo, hasLo, loEx := bound(m, "minimum", "exclusiveMinimum", true)
	hi, hasHi, hiEx := bound(m, "maximum", "exclusiveMaximum", false)
	l, h := math.Inf(-1), math.Inf(1)
	if hasLo {
		l = math.Ceil(lo)
		if loEx && l == lo {
			l++
		}
	}
	if hasHi {
		h = math.Floor(hi)
		if hiEx && h == hi {
			h--
		}
	}
	v := math.Max(l, math.Min(h, 1))
	if step, ok := m["multipleOf"].(float64); ok && step > 0 && step == math.Trunc(step) {
		if up := math.Ceil(v/step) * step; up <= h {
			v = up
		} else {
			v = math.Floor(h/step) * step
		}
	}
	return int64(v)
}

// numberIn is 1.5, or a number within m's bounds.
func numberIn(m map[string]any) any {
	lo, hasLo, loEx := bound(m, "minimum", "exclusiveMinimum", true)
	hi, hasHi, hiEx := bound(m, "maximum", "exclusiveMaximum", false)
	v := 1.5
	below := hasLo && (v < lo || loEx && v == lo)
	above := hasHi && (v > hi || hiEx && v == hi)
	switch {
	case (below || above) && hasLo && hasHi:
		v = lo + (hi-lo)/2
	case below && loEx:
		v = lo + 1
	case below:
		v = lo
	case above && hiEx:
		v = hi - 1
	case above:
		v = hi
	}
	if step, ok := m["multipleOf"].(float64); ok && step > 0 {
		v = math.Ceil(v/step) * step
		if hasHi && (v > hi || hiEx && v == hi) {
			v -= step
		}
	}
	return v
}

// bound reads a lower (or upper) bound: key inclusive, or exclusive (a
// number, or draft 4's true beside key), whichever is stricter.
func bound(m map[string]any, key, exclusive string, lower bool) (v float64, ok, isExclusive bool) {
	v, ok = m[key].(float64)
	switch ex := m[exclusive].(type) {
	case float64:
		if !ok || lower && ex >= v || !lower && ex <= v {
			return ex, true, true
		}
	case bool:
		return v, ok, ok && ex
	}
	return v, ok, false
}

func intKeyword(m map[string]any, key string) (int, bool) {
	f, ok := m[key].(float64)
	if !ok || f < 0 || f > 1<<20 {
		return 0, false
	}
	return int(f), true
}

// firstNotNull is the first branch that does not ask for null alone, or
// the first branch.
func (g *shaper) firstNotNull(branches []any) any {
	for _, b := range branches {
		bm, ok := b.(map[string]any)
		if !ok {
			return b
		}
		if ref, ok := bm["$ref"].(string); ok {
			if target, ok := g.resolve(ref); ok {
				if tm, ok := target.(map[string]any); ok {
					bm = tm
				}
			}
		}
		if t, _ := bm["type"].(string); t != "null" {
			return b
		}
	}
	return branches[0]
}

// allowsNull reports whether one of branches takes null.
func (g *shaper) allowsNull(branches []any) bool {
	for _, b := range branches {
		bm, ok := b.(map[string]any)
		if !ok {
			continue
		}
		switch t := bm["type"].(type) {
		case string:
			if t == "null" {
				return true
			}
		case []any:
			if slices.Contains(t, any("null")) {
				return true
			}
		}
	}
	return false
}

// merge is m with the branches of its allOf folded in: their properties
// and required lists joined, their other keywords where m has none.
func (g *shaper) merge(m map[string]any, all []any) map[string]any {
	out := map[string]any{}
	props := map[string]any{}
	var req []any
	fold := func(s map[string]any) {
		for k, v := range s {
			switch k {
			case "allOf", "$ref":
			case "properties":
				if p, ok := v.(map[string]any); ok {
					for name, ps := range p {
						props[name] = ps
					}
				}
			case "required":
				if r, ok := v.([]any); ok {
					req = append(req, r...)
				}
			default:
				if _, ok := out[k]; !ok {
					out[k] = v
				}
			}
		}
	}
	fold(m)
	for _, b := range all {
		bm, ok := b.(map[string]any)
		if !ok {
			continue
		}
		if ref, ok := bm["$ref"].(string); ok {
			if target, ok := g.resolve(ref); ok {
				if tm, ok := target.(map[string]any); ok {
					bm = tm
				}
			}
		}
		fold(bm)
	}
	if len(props) > 0 {
		out["properties"] = props
	}
	if len(req) > 0 {
		out["required"] = req
	}
	return out
}

// resolve follows a $ref within the schema: "#" or a JSON pointer such as
// "#/$defs/step". Others are not followed.
func (g *shaper) resolve(ref string) (any, bool) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	cur := g.root
	if frag == "" {
		return cur, true
	}
	if !strings.HasPrefix(frag, "/") {
		return nil, false
	}
	for _, part := range strings.Split(frag[1:], "/") {
		part = strings.NewReplacer("~1", "/", "~0", "~").Replace(part)
		switch c := cur.(type) {
		case map[string]any:
			if cur, ok = c[part]; !ok {
				return nil, false
			}
		default:
			return nil, false
		}
	}
	return cur, true
}
