package httpapi

import (
	"bytes"
	"encoding/json"

	"github.com/weir-gateway/weir/internal/fastjson"
)

// fields are the top-level members of a request body that Weir reads,
// each its JSON text as map[string]json.RawMessage would hold it (nil
// when absent; the last of a name given twice), and where the values of
// the members named "model" in any letter case are, for withModel.
type fields struct {
	model, stream, maxCompletionTokens, maxTokens []byte
	messages, tools, functions, responseFormat    []byte
	size, voice, quality, n, input, prompt        []byte
	promptCacheKey, user, safetyIdentifier        []byte
	models                                        modelSpans
}

// modelSpans are the spans of a body's top-level "model" values: nearly
// always one, kept inline so that a request holds no slice for it.
type modelSpans struct {
	known bool // false: withModel must find them by parsing the body
	first [2]int
	more  [][2]int
}

func (s *modelSpans) add(from, to int) {
	if !s.known {
		s.known, s.first = true, [2]int{from, to}
		return
	}
	s.more = append(s.more, [2]int{from, to})
}

// splice is body with the values at s replaced by upstream's name as a
// JSON string, as json.Marshal writes it.
func (s *modelSpans) splice(body []byte, upstream string) []byte {
	// A name of plain characters takes its length and two quotes.
	out := make([]byte, 0, len(body)+(len(upstream)+2)*(1+len(s.more)))
	last := 0
	for i := -1; i < len(s.more); i++ {
		sp := s.first
		if i >= 0 {
			sp = s.more[i]
		}
		out = fastjson.AppendString(append(out, body[last:sp[0]]...), upstream)
		last = sp[1]
	}
	return append(out, body[last:]...)
}

// slot is where the member named key goes, nil for one Weir does not read.
func (f *fields) slot(key []byte) *[]byte {
	switch string(key) {
	case "model":
		return &f.model
	case "stream":
		return &f.stream
	case "max_completion_tokens":
		return &f.maxCompletionTokens
	case "max_tokens":
		return &f.maxTokens
	case "messages":
		return &f.messages
	case "tools":
		return &f.tools
	case "functions":
		return &f.functions
	case "response_format":
		return &f.responseFormat
	case "size":
		return &f.size
	case "voice":
		return &f.voice
	case "quality":
		return &f.quality
	case "n":
		return &f.n
	case "input":
		return &f.input
	case "prompt":
		return &f.prompt
	case "prompt_cache_key":
		return &f.promptCacheKey
	case "user":
		return &f.user
	case "safety_identifier":
		return &f.safetyIdentifier
	}
	return nil
}

// get is the member named name (an endpoint's required field).
func (f *fields) get(name string) []byte {
	if p := f.slot([]byte(name)); p != nil {
		return *p
	}
	return nil
}

// scanFields reads body, a JSON object, in one pass without copying. It
// reports false for anything it does not read exactly as encoding/json
// reads the body into a map — malformed JSON, a key with escapes, nesting
// deeper than fastjson reads — and the caller decodes the body with
// encoding/json instead (readFields), for its result or its error.
func scanFields(body []byte) (fields, bool) {
	var f fields
	r := fastjson.NewReader(body)
	if !r.Open('{') {
		return f, false
	}
	for r.Next('}') {
		key := r.Key()
		from := r.Offset()
		v := r.Span()
		if r.Failed() {
			return f, false
		}
		if p := f.slot(key); p != nil {
			*p = v
		}
		if len(key) == len("model") && bytes.EqualFold(key, []byte("model")) {
			f.models.add(from, from+len(v))
		}
	}
	return f, r.End()
}

// readFields decodes body with encoding/json, the answer for a body
// scanFields does not read. The spans of its models are left unknown.
func readFields(body []byte) (fields, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return fields{}, err
	}
	var f fields
	for k, v := range raw {
		if p := f.slot([]byte(k)); p != nil {
			*p = v
		}
	}
	return f, nil
}

// jsonString, jsonInt64 and jsonBool are v, a JSON value, decoded as
// json.Unmarshal decodes it into their type (null is the zero value),
// and whether it could be.
func jsonString(v []byte) (string, bool) { return jsonValue[string](v) }
func jsonInt64(v []byte) (int64, bool)   { return jsonValue[int64](v) }
func jsonBool(v []byte) (bool, bool)     { return jsonValue[bool](v) }

// jsonValue reads v with fastjson where it reads it exactly as
// encoding/json would, and else with encoding/json, for its answer.
func jsonValue[T string | int64 | bool](v []byte) (T, bool) {
	var x T
	r := fastjson.NewReader(v)
	switch p := any(&x).(type) {
	case *string:
		*p = r.String()
	case *int64:
		*p = r.Int64()
	case *bool:
		*p = r.Bool()
	}
	if r.End() {
		return x, true
	}
	var slow T
	err := json.Unmarshal(v, &slow)
	return slow, err == nil
}

// arrayElements calls each for the elements of v, a well-formed JSON
// value, in order until it returns false. It reports whether v is an
// array (null is none, as json.Unmarshal leaves a slice nil).
func arrayElements(v []byte, each func(i int, elem []byte) bool) bool {
	r := fastjson.NewReader(v)
	if r.Null() && r.End() {
		return true
	}
	if !r.Open('[') {
		return false
	}
	for i := 0; r.Next(']'); i++ {
		elem := r.Span()
		if r.Failed() || !each(i, elem) {
			break
		}
	}
	if !r.Failed() {
		return true
	}
	// Deeper than fastjson reads: encoding/json's reading.
	var elems []json.RawMessage
	if json.Unmarshal(v, &elems) != nil {
		return false
	}
	for i, e := range elems {
		if !each(i, e) {
			break
		}
	}
	return true
}
