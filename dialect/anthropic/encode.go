package anthropic

import (
	"strconv"

	"github.com/weir-gateway/weir/internal/fastjson"
)

// appendJSON appends a's JSON to b, byte for byte as json.Marshal
// writes it (its blocks by Block's MarshalJSON), without reflection for
// the blocks an answer from Chat Completions has: an answer is encoded
// for every request.
func (a *Answer) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"id":`...)
	b = fastjson.AppendString(b, a.ID)
	b = append(b, `,"type":`...)
	b = fastjson.AppendString(b, a.Type)
	b = append(b, `,"role":`...)
	b = fastjson.AppendString(b, a.Role)
	b = append(b, `,"model":`...)
	b = fastjson.AppendString(b, a.Model)
	b = append(b, `,"content":`...)
	if a.Content == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range a.Content {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = a.Content[i].appendJSON(b); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	b = append(b, `,"stop_reason":`...)
	b = appendStringPtr(b, a.StopReason)
	b = append(b, `,"stop_sequence":`...)
	b = appendStringPtr(b, a.StopSequence)
	b = append(b, `,"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, a.Usage.InputTokens, 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, a.Usage.OutputTokens, 10)
	b = append(b, `,"cache_creation_input_tokens":`...)
	b = strconv.AppendInt(b, a.Usage.CacheCreationInputTokens, 10)
	b = append(b, `,"cache_read_input_tokens":`...)
	b = strconv.AppendInt(b, a.Usage.CacheReadInputTokens, 10)
	return append(b, "}}"...), nil
}

func appendStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return fastjson.AppendString(b, *s)
}

// appendJSON appends bl as its MarshalJSON writes it: text, tool_use
// and thinking blocks directly, the others by MarshalJSON.
func (bl *Block) appendJSON(b []byte) ([]byte, error) {
	var err error
	switch bl.Type {
	case BlockText:
		b = append(b, `{"type":`...)
		b = fastjson.AppendString(b, bl.Type)
		b = append(b, `,"text":`...)
		b = fastjson.AppendString(b, bl.Text)
	case BlockToolUse:
		b = append(b, `{"type":`...)
		b = fastjson.AppendString(b, bl.Type)
		b = append(b, `,"id":`...)
		b = fastjson.AppendString(b, bl.ID)
		b = append(b, `,"name":`...)
		b = fastjson.AppendString(b, bl.Name)
		b = append(b, `,"input":`...)
		in := bl.Input
		if len(in) == 0 {
			in = []byte(`{}`)
		}
		if b, err = fastjson.AppendRaw(b, in); err != nil {
			return nil, err
		}
	case BlockThinking:
		b = append(b, `{"type":`...)
		b = fastjson.AppendString(b, bl.Type)
		b = append(b, `,"thinking":`...)
		b = fastjson.AppendString(b, bl.Thinking)
		b = append(b, `,"signature":`...)
		b = fastjson.AppendString(b, bl.Signature)
		return append(b, '}'), nil
	default:
		return fastjson.AppendValue(b, *bl)
	}
	if len(bl.CacheControl) > 0 {
		b = append(b, `,"cache_control":`...)
		if b, err = fastjson.AppendRaw(b, bl.CacheControl); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}
