package anthropic

import (
	"encoding/json"

	"github.com/weir-gateway/weir/internal/fastjson"
)

// unmarshalRequest decodes a Messages request into r as json.Unmarshal
// does, the same result or the same error: the usual request is read
// without reflection for its plain fields and its messages of text,
// anything else (a key that matches a field only case-insensitively, a
// key given twice, a value of another type, malformed JSON) by
// json.Unmarshal.
func unmarshalRequest(body []byte, r *Request) error {
	var out Request
	rd := fastjson.NewReader(body)
	decodeRequest(rd, &out)
	if rd.End() {
		*r = out
		return nil
	}
	*r = Request{}
	return json.Unmarshal(body, r)
}

// The keys a Request and a Message know, which an unknown key must not
// match case-insensitively.
var (
	requestKeys = []string{"model", "max_tokens", "system", "messages", "tools", "tool_choice", "stop_sequences",
		"temperature", "top_p", "top_k", "metadata", "stream", "thinking"}
	messageKeys = []string{"role", "content"}
)

func decodeRequest(rd *fastjson.Reader, r *Request) {
	if !rd.Open('{') {
		return
	}
	var seen uint64
	for rd.Next('}') {
		key := rd.Key()
		switch string(key) {
		case "model":
			rd.Once(&seen, 0)
			r.Model = rd.String()
		case "max_tokens":
			rd.Once(&seen, 1)
			r.MaxTokens = rd.Int64()
		case "system":
			rd.Once(&seen, 2)
			r.System = decodeContent(rd, 0)
		case "messages":
			rd.Once(&seen, 3)
			r.Messages = decodeMessages(rd)
		case "tools":
			rd.Once(&seen, 4)
			unmarshalSpan(rd, &r.Tools)
		case "tool_choice":
			rd.Once(&seen, 5)
			unmarshalSpan(rd, &r.ToolChoice)
		case "stop_sequences":
			rd.Once(&seen, 6)
			unmarshalSpan(rd, &r.StopSequences)
		case "temperature":
			rd.Once(&seen, 7)
			r.Temperature = rd.Float64Ptr()
		case "top_p":
			rd.Once(&seen, 8)
			r.TopP = rd.Float64Ptr()
		case "top_k":
			rd.Once(&seen, 9)
			r.TopK = rd.Int64Ptr()
		case "metadata":
			rd.Once(&seen, 10)
			unmarshalSpan(rd, &r.Metadata)
		case "stream":
			rd.Once(&seen, 11)
			r.Stream = rd.Bool()
		case "thinking":
			rd.Once(&seen, 12)
			r.Thinking = rd.Raw()
		default:
			rd.SkipUnknown(key, requestKeys)
		}
	}
}

func decodeMessages(rd *fastjson.Reader) []Message {
	if rd.Null() || !rd.Open('[') {
		return nil
	}
	out := make([]Message, 0, 4)
	for rd.Next(']') {
		var m Message
		if !rd.Null() && rd.Open('{') {
			var seen uint64
			for rd.Next('}') {
				key := rd.Key()
				switch string(key) {
				case "role":
					rd.Once(&seen, 0)
					m.Role = rd.String()
				case "content":
					rd.Once(&seen, 1)
					m.Content = decodeContent(rd, 0)
				default:
					rd.SkipUnknown(key, messageKeys)
				}
			}
		}
		out = append(out, m)
	}
	return out
}

// maxContentDepth bounds how deep decodeContent reads blocks in
// tool_results' content; deeper is left to json.Unmarshal.
const maxContentDepth = 8

// blockKeys and sourceKeys are the keys a Block and a Source know.
var (
	blockKeys = []string{"type", "text", "source", "id", "name", "input", "tool_use_id", "content", "is_error",
		"thinking", "signature", "data", "cache_control"}
	sourceKeys = []string{"type", "media_type", "data", "url"}
)

// decodeContent decodes a Content as its UnmarshalJSON does: a string
// as one text block, an array as blocks, null as none.
func decodeContent(rd *fastjson.Reader, depth int) Content {
	switch rd.Peek() {
	case 'n':
		rd.Null()
		return nil
	case '"':
		return Content{{Type: BlockText, Text: rd.String()}}
	case '[':
	default:
		rd.Fail() // json.Unmarshal's error
		return nil
	}
	if depth > maxContentDepth {
		rd.Fail()
		return nil
	}
	rd.Open('[')
	c := make(Content, 0, 1)
	for rd.Next(']') {
		var b Block
		decodeBlock(rd, &b, depth)
		c = append(c, b)
	}
	return c
}

func decodeBlock(rd *fastjson.Reader, b *Block, depth int) {
	if rd.Null() || !rd.Open('{') {
		return
	}
	var seen uint64
	for rd.Next('}') {
		key := rd.Key()
		switch string(key) {
		case "type":
			rd.Once(&seen, 0)
			b.Type = rd.String()
		case "text":
			rd.Once(&seen, 1)
			b.Text = rd.String()
		case "source":
			rd.Once(&seen, 2)
			b.Source = decodeSource(rd)
		case "id":
			rd.Once(&seen, 3)
			b.ID = rd.String()
		case "name":
			rd.Once(&seen, 4)
			b.Name = rd.String()
		case "input":
			rd.Once(&seen, 5)
			b.Input = rd.Raw()
		case "tool_use_id":
			rd.Once(&seen, 6)
			b.ToolUseID = rd.String()
		case "content":
			rd.Once(&seen, 7)
			b.Content = decodeContent(rd, depth+1)
		case "is_error":
			rd.Once(&seen, 8)
			b.IsError = rd.Bool()
		case "thinking":
			rd.Once(&seen, 9)
			b.Thinking = rd.String()
		case "signature":
			rd.Once(&seen, 10)
			b.Signature = rd.String()
		case "data":
			rd.Once(&seen, 11)
			b.Data = rd.String()
		case "cache_control":
			rd.Once(&seen, 12)
			b.CacheControl = rd.Raw()
		default:
			rd.SkipUnknown(key, blockKeys)
		}
	}
}

func decodeSource(rd *fastjson.Reader) *Source {
	if rd.Null() || !rd.Open('{') {
		return nil
	}
	src := &Source{}
	var seen uint64
	for rd.Next('}') {
		key := rd.Key()
		switch string(key) {
		case "type":
			rd.Once(&seen, 0)
			src.Type = rd.String()
		case "media_type":
			rd.Once(&seen, 1)
			src.MediaType = rd.String()
		case "data":
			rd.Once(&seen, 2)
			src.Data = rd.String()
		case "url":
			rd.Once(&seen, 3)
			src.URL = rd.String()
		default:
			rd.SkipUnknown(key, sourceKeys)
		}
	}
	return src
}

// unmarshalSpan decodes the next value into v with json.Unmarshal,
// failing rd if it cannot (json.Unmarshal of the whole body then gives
// the error, naming the field's path).
func unmarshalSpan(rd *fastjson.Reader, v any) {
	span := rd.Span()
	if rd.Failed() {
		return
	}
	if json.Unmarshal(span, v) != nil {
		rd.Fail()
	}
}
