package openaiwire

import (
	"strconv"

	"github.com/weir-gateway/weir/internal/fastjson"
)

// Marshal is json.Marshal(c): the same bytes, or the same failure.
func (c *ChatRequest) Marshal() ([]byte, error) {
	n := 256
	for i := range c.Messages {
		n += 64 + len(c.Messages[i].Content)
		for _, tc := range c.Messages[i].ToolCalls {
			n += 64 + len(tc.Function.Arguments)
		}
	}
	return c.AppendJSON(make([]byte, 0, n))
}

// AppendJSON appends c's JSON to b, byte for byte as json.Marshal writes
// it, without reflection for its messages and plain fields: a
// translation encodes a request for every one it sends.
func (c *ChatRequest) AppendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"model":`...)
	b = fastjson.AppendString(b, c.Model)
	b = append(b, `,"messages":`...)
	if c.Messages == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range c.Messages {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = c.Messages[i].appendJSON(b); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	if len(c.Tools) > 0 {
		b = append(b, `,"tools":`...)
		if b, err = fastjson.AppendValue(b, c.Tools); err != nil {
			return nil, err
		}
	}
	if b, err = appendRawField(b, `,"tool_choice":`, c.ToolChoice); err != nil {
		return nil, err
	}
	b = appendBoolPtrField(b, `,"parallel_tool_calls":`, c.ParallelToolCalls)
	if c.ResponseFormat != nil {
		b = append(b, `,"response_format":`...)
		if b, err = fastjson.AppendValue(b, c.ResponseFormat); err != nil {
			return nil, err
		}
	}
	if b, err = c.appendSampling(b); err != nil {
		return nil, err
	}
	if c.Stream {
		b = append(b, `,"stream":true`...)
	}
	if c.StreamOptions != nil {
		b = append(b, `,"stream_options":{"include_usage":`...)
		b = strconv.AppendBool(b, c.StreamOptions.IncludeUsage)
		b = append(b, '}')
	}
	b = appendStringField(b, `,"user":`, c.User)
	b = appendStringField(b, `,"reasoning_effort":`, c.ReasoningEffort)
	b = appendStringField(b, `,"verbosity":`, c.Verbosity)
	b = appendStringField(b, `,"service_tier":`, c.ServiceTier)
	b = appendStringField(b, `,"prompt_cache_key":`, c.PromptCacheKey)
	b = appendStringField(b, `,"prompt_cache_retention":`, c.PromptCacheRetention)
	b = appendStringField(b, `,"safety_identifier":`, c.SafetyIdentifier)
	if c.N != nil {
		b = append(b, `,"n":`...)
		b = strconv.AppendInt(b, int64(*c.N), 10)
	}
	if c.Logprobs {
		b = append(b, `,"logprobs":true`...)
	}
	if c.TopLogprobs != nil {
		b = append(b, `,"top_logprobs":`...)
		b = strconv.AppendInt(b, int64(*c.TopLogprobs), 10)
	}
	if len(c.Modalities) > 0 {
		b = append(b, `,"modalities":`...)
		if b, err = fastjson.AppendValue(b, c.Modalities); err != nil {
			return nil, err
		}
	}
	if len(c.Functions) > 0 {
		b = append(b, `,"functions":`...)
		if b, err = fastjson.AppendValue(b, c.Functions); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct {
		key string
		raw []byte
	}{{`,"function_call":`, c.FunctionCall}, {`,"audio":`, c.Audio}, {`,"prediction":`, c.Prediction}} {
		if b, err = appendRawField(b, f.key, f.raw); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendSampling appends c's bounds and sampling parameters, from
// max_tokens to seed.
func (c *ChatRequest) appendSampling(b []byte) ([]byte, error) {
	var err error
	b = appendIntPtrField(b, `,"max_tokens":`, c.MaxTokens)
	b = appendIntPtrField(b, `,"max_completion_tokens":`, c.MaxCompletionTokens)
	if b, err = appendFloatPtrField(b, `,"temperature":`, c.Temperature); err != nil {
		return nil, err
	}
	if b, err = appendFloatPtrField(b, `,"top_p":`, c.TopP); err != nil {
		return nil, err
	}
	b = appendIntPtrField(b, `,"top_k":`, c.TopK)
	if b, err = appendRawField(b, `,"stop":`, c.Stop); err != nil {
		return nil, err
	}
	if b, err = appendFloatPtrField(b, `,"frequency_penalty":`, c.FrequencyPenalty); err != nil {
		return nil, err
	}
	if b, err = appendFloatPtrField(b, `,"presence_penalty":`, c.PresencePenalty); err != nil {
		return nil, err
	}
	b = appendIntPtrField(b, `,"seed":`, c.Seed)
	return b, nil
}

// appendJSON appends m as json.Marshal writes it.
func (m *Message) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"role":`...)
	b = fastjson.AppendString(b, m.Role)
	b = append(b, `,"content":`...)
	if b, err = fastjson.AppendRaw(b, m.Content); err != nil {
		return nil, err
	}
	b = appendStringField(b, `,"name":`, m.Name)
	b = appendStringField(b, `,"refusal":`, m.Refusal)
	if len(m.ToolCalls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i := range m.ToolCalls {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = m.ToolCalls[i].appendJSON(b); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	b = appendStringField(b, `,"tool_call_id":`, m.ToolCallID)
	if m.FunctionCall != nil {
		b = append(b, `,"function_call":`...)
		b = m.FunctionCall.appendJSON(b)
	}
	b = appendStringField(b, `,"reasoning_content":`, m.ReasoningContent)
	return append(b, '}'), nil
}

// appendJSON appends tc as json.Marshal writes it.
func (tc *ToolCall) appendJSON(b []byte) ([]byte, error) {
	b = append(b, '{')
	if tc.Index != nil {
		b = append(b, `"index":`...)
		b = strconv.AppendInt(b, int64(*tc.Index), 10)
		b = append(b, ',')
	}
	if tc.ID != "" {
		b = append(b, `"id":`...)
		b = fastjson.AppendString(b, tc.ID)
		b = append(b, ',')
	}
	if tc.Type != "" {
		b = append(b, `"type":`...)
		b = fastjson.AppendString(b, tc.Type)
		b = append(b, ',')
	}
	b = append(b, `"function":`...)
	b = tc.Function.appendJSON(b)
	b, err := appendRawField(b, `,"extra_content":`, tc.ExtraContent)
	if err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// appendJSON appends f as json.Marshal writes it.
func (f *FunctionCall) appendJSON(b []byte) []byte {
	b = append(b, '{')
	if f.Name != "" {
		b = append(b, `"name":`...)
		b = fastjson.AppendString(b, f.Name)
		b = append(b, ',')
	}
	b = append(b, `"arguments":`...)
	b = fastjson.AppendString(b, f.Arguments)
	return append(b, '}')
}

// The omitempty fields: key (with its comma) and value, or nothing when
// the value is empty.

func appendStringField(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return fastjson.AppendString(append(b, key...), s)
}

func appendIntPtrField(b []byte, key string, n *int64) []byte {
	if n == nil {
		return b
	}
	return strconv.AppendInt(append(b, key...), *n, 10)
}

func appendBoolPtrField(b []byte, key string, v *bool) []byte {
	if v == nil {
		return b
	}
	return strconv.AppendBool(append(b, key...), *v)
}

func appendFloatPtrField(b []byte, key string, f *float64) ([]byte, error) {
	if f == nil {
		return b, nil
	}
	return fastjson.AppendFloat64(append(b, key...), *f)
}

func appendRawField(b []byte, key string, raw []byte) ([]byte, error) {
	if len(raw) == 0 {
		return b, nil
	}
	return fastjson.AppendRaw(append(b, key...), raw)
}
