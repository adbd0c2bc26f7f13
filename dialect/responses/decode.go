package responses

import (
	"encoding/json"
	"sort"

	"github.com/weir-gateway/weir/internal/fastjson"
)

// decodeFast decodes a request as parseSlow does, without reflection
// for its plain fields: the Request json.Unmarshal makes of body and
// the raw values of the fields refuseState and check read. ok is false
// for a body it does not read exactly as parseSlow does — one that is
// not an object, an unknown key (or one that only matches a field
// case-insensitively), a key given twice, a value of another type —
// which parseSlow then reads, for its result or its error.
func decodeFast(body []byte) (_ *Request, raw map[string]json.RawMessage, ok bool) {
	rd := fastjson.NewReader(body)
	if !rd.Open('{') {
		return nil, nil, false
	}
	r := &Request{}
	var seen uint64
	for rd.Next('}') && !rd.Failed() {
		key := rd.Key()
		bit, known := fieldBits[string(key)]
		if !known {
			return nil, nil, false
		}
		rd.Once(&seen, bit)
		start := rd.Offset()
		if !decodeField(rd, r, string(key)) {
			return nil, nil, false
		}
		if keepRaw[string(key)] {
			if raw == nil {
				raw = make(map[string]json.RawMessage, 2)
			}
			raw[string(key)] = rd.Since(start)
		}
	}
	if !rd.End() {
		return nil, nil, false
	}
	return r, raw, true
}

// fieldBits numbers the known top-level fields, for Reader.Once.
var fieldBits = func() map[string]uint {
	names := make([]string, 0, len(knownFields))
	for k := range knownFields {
		names = append(names, k)
	}
	sort.Strings(names)
	m := make(map[string]uint, len(names))
	for i, k := range names {
		m[k] = uint(i)
	}
	return m
}()

// keepRaw are the fields whose raw values refuseState and check read.
var keepRaw = map[string]bool{
	"input": true, "include": true, "previous_response_id": true, "conversation": true, "store": true,
	"background": true, "prompt": true, "truncation": true, "top_logprobs": true,
}

// decodeField decodes the value of the known field key into r, as
// json.Unmarshal decodes it into the Request, reporting whether it
// could: the plain fields by rd, the others by json.Unmarshal of their
// value alone (whose errors would name the field's path differently,
// so parseSlow reports them).
func decodeField(rd *fastjson.Reader, r *Request, key string) bool {
	switch key {
	case "model":
		r.Model = rd.String()
	case "input":
		span := rd.Span()
		if len(span) > 0 && span[0] == '"' {
			r.Input.IsText = true
			r.Input.Text = fastjson.NewReader(span).String()
			return !rd.Failed()
		}
		return span != nil && json.Unmarshal(span, &r.Input) == nil
	case "instructions":
		r.Instructions = rd.StringPtr()
	case "tools":
		return unmarshalSpan(rd, &r.Tools)
	case "tool_choice":
		r.ToolChoice = rd.Raw()
	case "text":
		return unmarshalSpan(rd, &r.Text)
	case "max_output_tokens":
		r.MaxOutputTokens = rd.Int64Ptr()
	case "temperature":
		r.Temperature = rd.Float64Ptr()
	case "top_p":
		r.TopP = rd.Float64Ptr()
	case "frequency_penalty":
		r.FrequencyPenalty = rd.Float64Ptr()
	case "presence_penalty":
		r.PresencePenalty = rd.Float64Ptr()
	case "stream":
		r.Stream = rd.Bool()
	case "metadata":
		return unmarshalSpan(rd, &r.Metadata)
	case "parallel_tool_calls":
		r.ParallelToolCalls = rd.BoolPtr()
	case "user":
		r.User = rd.String()
	case "reasoning":
		return unmarshalSpan(rd, &r.Reasoning)
	case "service_tier":
		r.ServiceTier = rd.String()
	case "prompt_cache_key":
		r.PromptCacheKey = rd.String()
	case "prompt_cache_retention":
		r.PromptCacheRetention = rd.String()
	case "safety_identifier":
		r.SafetyIdentifier = rd.String()
	case "store":
		r.Store = rd.BoolPtr()
	default:
		rd.Skip() // a field the Request has none for
	}
	return !rd.Failed()
}

// unmarshalSpan decodes the next value into v with json.Unmarshal.
func unmarshalSpan(rd *fastjson.Reader, v any) bool {
	span := rd.Span()
	return span != nil && json.Unmarshal(span, v) == nil
}
