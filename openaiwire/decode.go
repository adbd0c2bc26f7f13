package openaiwire

import (
	"encoding/json"

	"github.com/weir-gateway/weir/internal/fastjson"
)

// UnmarshalChatCompletion decodes a chat.completion body into cc, as
// json.Unmarshal does, the same result or the same error: a body of the
// usual shape is read without reflection, anything else (a key that
// matches a field only case-insensitively, a key given twice, a value of
// another type, malformed JSON) by json.Unmarshal.
func UnmarshalChatCompletion(body []byte, cc *ChatCompletion) error {
	r := fastjson.NewReader(body)
	var out ChatCompletion
	readCompletion(r, &out)
	if r.End() {
		*cc = out
		return nil
	}
	// json.Unmarshal decodes into a value of its own, so that cc, which
	// it would make escape, stays where the caller has it.
	fallback := new(ChatCompletion)
	err := json.Unmarshal(body, fallback)
	*cc = *fallback
	return err
}

// UnmarshalChatChunk decodes a chat.completion.chunk into c as
// json.Unmarshal does, as UnmarshalChatCompletion decodes an answer: an
// error inside the stream, a rare chunk, is left to json.Unmarshal too.
func UnmarshalChatChunk(data []byte, c *ChatChunk) error {
	r := fastjson.NewReader(data)
	var out ChatChunk
	readChunk(r, &out)
	if r.End() {
		*c = out
		return nil
	}
	fallback := new(ChatChunk) // as in UnmarshalChatCompletion
	err := json.Unmarshal(data, fallback)
	*c = *fallback
	return err
}

// The keys each decoded object knows, which an unknown key must not
// match case-insensitively.
var (
	completionKeys  = []string{"id", "object", "created", "model", "choices", "usage", "service_tier", "system_fingerprint"}
	choiceKeys      = []string{"index", "message", "logprobs", "finish_reason"}
	messageKeys     = []string{"role", "content", "refusal", "tool_calls", "reasoning_content"}
	toolCallKeys    = []string{"index", "id", "type", "function", "extra_content"}
	functionKeys    = []string{"name", "arguments"}
	usageKeys       = []string{"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details"}
	cachedKeys      = []string{"cached_tokens"}
	reasoningKeys   = []string{"reasoning_tokens"}
	chunkKeys       = []string{"id", "object", "created", "model", "system_fingerprint", "choices", "usage", "service_tier", "error"}
	chunkChoiceKeys = []string{"index", "delta", "logprobs", "finish_reason"}
	deltaKeys       = []string{"role", "content", "refusal", "reasoning_content", "tool_calls"}
)

func readChunk(r *fastjson.Reader, c *ChatChunk) {
	if !r.Open('{') {
		return
	}
	var seen uint64
	for r.Next('}') {
		key := r.Key()
		switch string(key) {
		case "id":
			r.Once(&seen, 0)
			c.ID = r.String()
		case "object":
			r.Once(&seen, 1)
			c.Object = r.String()
		case "created":
			r.Once(&seen, 2)
			c.Created = r.Int64()
		case "model":
			r.Once(&seen, 3)
			c.Model = r.String()
		case "system_fingerprint":
			r.Once(&seen, 4)
			c.SystemFingerprint = r.Raw()
		case "choices":
			r.Once(&seen, 5)
			c.Choices = readChunkChoices(r)
		case "usage":
			r.Once(&seen, 6)
			c.Usage = readUsage(r)
		case "service_tier":
			r.Once(&seen, 7)
			c.ServiceTier = r.String()
		case "error":
			if !r.Null() {
				r.Fail() // json.Unmarshal reads it
			}
		default:
			r.SkipUnknown(key, chunkKeys)
		}
	}
}

func readChunkChoices(r *fastjson.Reader) []ChunkChoice {
	if r.Null() || !r.Open('[') {
		return nil
	}
	out := make([]ChunkChoice, 0, 1)
	for r.Next(']') {
		var c ChunkChoice
		if !r.Null() && r.Open('{') {
			var seen uint64
			for r.Next('}') {
				key := r.Key()
				switch string(key) {
				case "index":
					r.Once(&seen, 0)
					c.Index = readInt(r)
				case "delta":
					r.Once(&seen, 1)
					readDelta(r, &c.Delta)
				case "logprobs":
					r.Once(&seen, 2)
					c.Logprobs = r.Raw()
				case "finish_reason":
					r.Once(&seen, 3)
					c.FinishReason = r.StringPtr()
				default:
					r.SkipUnknown(key, chunkChoiceKeys)
				}
			}
		}
		out = append(out, c)
	}
	return out
}

func readDelta(r *fastjson.Reader, d *Delta) {
	if r.Null() || !r.Open('{') {
		return
	}
	var seen uint64
	for r.Next('}') {
		key := r.Key()
		switch string(key) {
		case "role":
			r.Once(&seen, 0)
			d.Role = r.String()
		case "content":
			r.Once(&seen, 1)
			d.Content = r.StringPtr()
		case "refusal":
			r.Once(&seen, 2)
			d.Refusal = r.StringPtr()
		case "reasoning_content":
			r.Once(&seen, 3)
			d.ReasoningContent = r.StringPtr()
		case "tool_calls":
			r.Once(&seen, 4)
			d.ToolCalls = readToolCalls(r)
		default:
			r.SkipUnknown(key, deltaKeys)
		}
	}
}

func readCompletion(r *fastjson.Reader, cc *ChatCompletion) {
	if !r.Open('{') {
		return // null too: json.Unmarshal decides
	}
	var seen uint64
	for r.Next('}') {
		key := r.Key()
		switch string(key) {
		case "id":
			r.Once(&seen, 0)
			cc.ID = r.String()
		case "object":
			r.Once(&seen, 1)
			cc.Object = r.String()
		case "created":
			r.Once(&seen, 2)
			cc.Created = r.Int64()
		case "model":
			r.Once(&seen, 3)
			cc.Model = r.String()
		case "choices":
			r.Once(&seen, 4)
			cc.Choices = readChoices(r)
		case "usage":
			r.Once(&seen, 5)
			cc.Usage = readUsage(r)
		case "service_tier":
			r.Once(&seen, 6)
			cc.ServiceTier = r.String()
		case "system_fingerprint":
			r.Once(&seen, 7)
			cc.SystemFingerprint = r.Raw()
		default:
			r.SkipUnknown(key, completionKeys)
		}
	}
}

func readChoices(r *fastjson.Reader) []Choice {
	if r.Null() || !r.Open('[') {
		return nil
	}
	out := make([]Choice, 0, 1)
	for r.Next(']') {
		var c Choice
		readChoice(r, &c)
		out = append(out, c)
	}
	return out
}

func readChoice(r *fastjson.Reader, c *Choice) {
	if r.Null() || !r.Open('{') {
		return
	}
	var seen uint64
	for r.Next('}') {
		key := r.Key()
		switch string(key) {
		case "index":
			r.Once(&seen, 0)
			c.Index = readInt(r)
		case "message":
			r.Once(&seen, 1)
			readAnswerMessage(r, &c.Message)
		case "logprobs":
			r.Once(&seen, 2)
			c.Logprobs = r.Raw()
		case "finish_reason":
			r.Once(&seen, 3)
			c.FinishReason = r.StringPtr()
		default:
			r.SkipUnknown(key, choiceKeys)
		}
	}
}

func readAnswerMessage(r *fastjson.Reader, m *AnswerMessage) {
	if r.Null() || !r.Open('{') {
		return
	}
	var seen uint64
	for r.Next('}') {
		key := r.Key()
		switch string(key) {
		case "role":
			r.Once(&seen, 0)
			m.Role = r.String()
		case "content":
			r.Once(&seen, 1)
			m.Content = r.Raw()
		case "refusal":
			r.Once(&seen, 2)
			m.Refusal = r.StringPtr()
		case "tool_calls":
			r.Once(&seen, 3)
			m.ToolCalls = readToolCalls(r)
		case "reasoning_content":
			r.Once(&seen, 4)
			m.ReasoningContent = r.String()
		default:
			r.SkipUnknown(key, messageKeys)
		}
	}
}

func readToolCalls(r *fastjson.Reader) []ToolCall {
	if r.Null() || !r.Open('[') {
		return nil
	}
	out := []ToolCall{}
	for r.Next(']') {
		var tc ToolCall
		readToolCall(r, &tc)
		out = append(out, tc)
	}
	return out
}

func readToolCall(r *fastjson.Reader, tc *ToolCall) {
	if r.Null() || !r.Open('{') {
		return
	}
	var seen uint64
	for r.Next('}') {
		key := r.Key()
		switch string(key) {
		case "index":
			r.Once(&seen, 0)
			if !r.Null() {
				i := readInt(r)
				tc.Index = &i
			}
		case "id":
			r.Once(&seen, 1)
			tc.ID = r.String()
		case "type":
			r.Once(&seen, 2)
			tc.Type = r.String()
		case "function":
			r.Once(&seen, 3)
			readFunctionCall(r, &tc.Function)
		case "extra_content":
			r.Once(&seen, 4)
			tc.ExtraContent = r.Raw()
		default:
			r.SkipUnknown(key, toolCallKeys)
		}
	}
}

func readFunctionCall(r *fastjson.Reader, f *FunctionCall) {
	if r.Null() || !r.Open('{') {
		return
	}
	var seen uint64
	for r.Next('}') {
		key := r.Key()
		switch string(key) {
		case "name":
			r.Once(&seen, 0)
			f.Name = r.String()
		case "arguments":
			r.Once(&seen, 1)
			f.Arguments = r.String()
		default:
			r.SkipUnknown(key, functionKeys)
		}
	}
}

func readUsage(r *fastjson.Reader) *Usage {
	if r.Null() || !r.Open('{') {
		return nil
	}
	u := &Usage{}
	var seen uint64
	for r.Next('}') {
		key := r.Key()
		switch string(key) {
		case "prompt_tokens":
			r.Once(&seen, 0)
			u.PromptTokens = r.Int64()
		case "completion_tokens":
			r.Once(&seen, 1)
			u.CompletionTokens = r.Int64()
		case "total_tokens":
			r.Once(&seen, 2)
			u.TotalTokens = r.Int64()
		case "prompt_tokens_details":
			r.Once(&seen, 3)
			readOneInt(r, "cached_tokens", cachedKeys, &u.PromptTokensDetails.CachedTokens)
		case "completion_tokens_details":
			r.Once(&seen, 4)
			if !r.Null() {
				u.CompletionTokensDetails = &CompletionTokensDetails{}
				readOneInt(r, "reasoning_tokens", reasoningKeys, &u.CompletionTokensDetails.ReasoningTokens)
			}
		default:
			r.SkipUnknown(key, usageKeys)
		}
	}
	return u
}

// readOneInt reads an object of which only the integer name is kept
// (into n), or null.
func readOneInt(r *fastjson.Reader, name string, keys []string, n *int64) {
	if r.Null() || !r.Open('{') {
		return
	}
	var seen uint64
	for r.Next('}') {
		key := r.Key()
		if string(key) == name {
			r.Once(&seen, 0)
			*n = r.Int64()
			continue
		}
		r.SkipUnknown(key, keys)
	}
}

// readInt reads an int.
func readInt(r *fastjson.Reader) int {
	n := r.Int64()
	if int64(int(n)) != n {
		r.Fail()
	}
	return int(n)
}
