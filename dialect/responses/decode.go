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
		decodeInput(rd, &r.Input)
	case "instructions":
		r.Instructions = rd.StringPtr()
	case "tools":
		r.Tools = decodeTools(rd)
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

// The keys an Item, a Part and a Tool know.
var (
	itemKeys = []string{"type", "id", "status", "role", "content", "call_id", "name", "arguments", "output"}
	partKeys = []string{"type", "text", "image_url", "detail", "file_id", "file_data", "filename", "file_url", "refusal"}
	toolKeys = []string{"type", "name", "description", "parameters", "strict"}
)

// decodeInput decodes the input as Input's UnmarshalJSON does: a string
// as the text, an array as items, null as none.
func decodeInput(rd *fastjson.Reader, in *Input) {
	switch rd.Peek() {
	case 'n':
		rd.Null()
		return
	case '"':
		in.IsText, in.Text = true, rd.String()
		return
	case '[':
	default:
		rd.Fail() // json.Unmarshal's error
		return
	}
	rd.Open('[')
	in.Items = make([]Item, 0, 4)
	for rd.Next(']') {
		var it Item
		decodeItem(rd, &it)
		in.Items = append(in.Items, it)
	}
}

func decodeItem(rd *fastjson.Reader, it *Item) {
	if rd.Null() || !rd.Open('{') {
		return
	}
	var seen uint64
	for rd.Next('}') {
		key := rd.Key()
		switch string(key) {
		case "type":
			rd.Once(&seen, 0)
			it.Type = rd.String()
		case "id":
			rd.Once(&seen, 1)
			it.ID = rd.String()
		case "status":
			rd.Once(&seen, 2)
			it.Status = rd.String()
		case "role":
			rd.Once(&seen, 3)
			it.Role = rd.String()
		case "content":
			rd.Once(&seen, 4)
			decodeContent(rd, &it.Content)
		case "call_id":
			rd.Once(&seen, 5)
			it.CallID = rd.String()
		case "name":
			rd.Once(&seen, 6)
			it.Name = rd.String()
		case "arguments":
			rd.Once(&seen, 7)
			it.Arguments = rd.String()
		case "output":
			rd.Once(&seen, 8)
			decodeContent(rd, &it.Output)
		default:
			rd.SkipUnknown(key, itemKeys)
		}
	}
}

// decodeContent decodes a Content as its UnmarshalJSON does.
func decodeContent(rd *fastjson.Reader, c *Content) {
	switch rd.Peek() {
	case 'n':
		rd.Null()
		return
	case '"':
		c.IsText, c.Set, c.Text = true, true, rd.String()
		return
	case '[':
	default:
		rd.Fail() // json.Unmarshal's error
		return
	}
	rd.Open('[')
	c.Set = true
	c.Parts = make([]Part, 0, 1)
	for rd.Next(']') {
		var p Part
		decodePart(rd, &p)
		c.Parts = append(c.Parts, p)
	}
}

func decodePart(rd *fastjson.Reader, p *Part) {
	if rd.Null() || !rd.Open('{') {
		return
	}
	var seen uint64
	for rd.Next('}') {
		key := rd.Key()
		var field *string
		switch string(key) {
		case "type":
			rd.Once(&seen, 0)
			field = &p.Type
		case "text":
			rd.Once(&seen, 1)
			field = &p.Text
		case "image_url":
			rd.Once(&seen, 2)
			field = &p.ImageURL
		case "detail":
			rd.Once(&seen, 3)
			field = &p.Detail
		case "file_id":
			rd.Once(&seen, 4)
			field = &p.FileID
		case "file_data":
			rd.Once(&seen, 5)
			field = &p.FileData
		case "filename":
			rd.Once(&seen, 6)
			field = &p.Filename
		case "file_url":
			rd.Once(&seen, 7)
			field = &p.FileURL
		case "refusal":
			rd.Once(&seen, 8)
			field = &p.Refusal
		default:
			rd.SkipUnknown(key, partKeys)
			continue
		}
		*field = rd.String()
	}
}

// decodeTools decodes the tools as json.Unmarshal does, each with its
// Raw, the tool as it came.
func decodeTools(rd *fastjson.Reader) []Tool {
	if rd.Null() || !rd.Open('[') {
		return nil
	}
	tools := make([]Tool, 0, 1)
	for rd.Next(']') {
		var t Tool
		start := rd.Offset()
		if rd.Peek() == 'n' {
			rd.Fail() // a null tool: left to json.Unmarshal
		}
		decodeTool(rd, &t)
		if !rd.Failed() {
			t.Raw = append(json.RawMessage(nil), rd.Since(start)...)
		}
		tools = append(tools, t)
	}
	return tools
}

func decodeTool(rd *fastjson.Reader, t *Tool) {
	if !rd.Open('{') {
		return
	}
	var seen uint64
	for rd.Next('}') {
		key := rd.Key()
		switch string(key) {
		case "type":
			rd.Once(&seen, 0)
			t.Type = rd.String()
		case "name":
			rd.Once(&seen, 1)
			t.Name = rd.String()
		case "description":
			rd.Once(&seen, 2)
			t.Description = rd.StringPtr()
		case "parameters":
			rd.Once(&seen, 3)
			t.Parameters = rd.Raw()
		case "strict":
			rd.Once(&seen, 4)
			t.Strict = rd.BoolPtr()
		default:
			rd.SkipUnknown(key, toolKeys)
		}
	}
}
