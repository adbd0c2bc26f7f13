package responses

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/weir-gateway/weir/internal/fastjson"
)

// appendJSON appends r's JSON to b, byte for byte as json.Marshal
// writes it (its output items and parts by their MarshalJSON methods),
// without reflection: a response is encoded for every answer.
func (r *Response) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"id":`...)
	b = fastjson.AppendString(b, r.ID)
	b = append(b, `,"object":`...)
	b = fastjson.AppendString(b, r.Object)
	b = append(b, `,"created_at":`...)
	b = strconv.AppendInt(b, r.CreatedAt, 10)
	b = append(b, `,"status":`...)
	b = fastjson.AppendString(b, r.Status)
	b = append(b, `,"background":`...)
	b = strconv.AppendBool(b, r.Background)
	b = append(b, `,"error":`...)
	if e := r.Error; e != nil {
		b = append(b, `{"code":`...)
		b = fastjson.AppendString(b, e.Code)
		b = append(b, `,"message":`...)
		b = fastjson.AppendString(b, e.Message)
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"incomplete_details":`...)
	if d := r.IncompleteDetails; d != nil {
		b = append(b, `{"reason":`...)
		b = fastjson.AppendString(b, d.Reason)
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"instructions":`...)
	b = appendStringPtr(b, r.Instructions)
	b = append(b, `,"max_output_tokens":`...)
	if r.MaxOutputTokens != nil {
		b = strconv.AppendInt(b, *r.MaxOutputTokens, 10)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"model":`...)
	b = fastjson.AppendString(b, r.Model)
	b = append(b, `,"output":`...)
	b = appendOutput(b, r.Output)
	b = append(b, `,"parallel_tool_calls":`...)
	b = strconv.AppendBool(b, r.ParallelToolCalls)
	b = append(b, `,"previous_response_id":`...)
	b = appendStringPtr(b, r.PreviousResponseID)
	b = append(b, `,"reasoning":{"effort":`...)
	b = appendStringPtr(b, r.Reasoning.Effort)
	b = append(b, `,"summary":`...)
	b = appendStringPtr(b, r.Reasoning.Summary)
	b = append(b, `},"service_tier":`...)
	b = appendStringPtr(b, r.ServiceTier)
	b = append(b, `,"store":`...)
	b = strconv.AppendBool(b, r.Store)
	b = append(b, `,"temperature":`...)
	if b, err = appendFloatPtr(b, r.Temperature); err != nil {
		return nil, err
	}
	b = append(b, `,"text":`...)
	if b, err = appendText(b, &r.Text); err != nil {
		return nil, err
	}
	b = append(b, `,"tool_choice":`...)
	if b, err = fastjson.AppendRaw(b, r.ToolChoice); err != nil {
		return nil, err
	}
	b = append(b, `,"tools":`...)
	if b, err = appendRaws(b, r.Tools); err != nil {
		return nil, err
	}
	b = append(b, `,"top_p":`...)
	if b, err = appendFloatPtr(b, r.TopP); err != nil {
		return nil, err
	}
	b = append(b, `,"truncation":`...)
	b = fastjson.AppendString(b, r.Truncation)
	b = append(b, `,"usage":`...)
	b = appendUsage(b, r.Usage)
	b = append(b, `,"user":`...)
	b = appendStringPtr(b, r.User)
	b = append(b, `,"metadata":`...)
	switch {
	case r.Metadata == nil:
		b = append(b, "null"...)
	case len(r.Metadata) == 0:
		b = append(b, "{}"...)
	default:
		if b, err = fastjson.AppendValue(b, r.Metadata); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func appendStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return fastjson.AppendString(b, *s)
}

// appendFloatPtr appends f, or null; NaN and the infinities are
// json.Marshal's error.
func appendFloatPtr(b []byte, f *float64) ([]byte, error) {
	switch {
	case f == nil:
		return append(b, "null"...), nil
	case math.IsNaN(*f) || math.IsInf(*f, 0):
		return fastjson.AppendValue(b, *f)
	}
	return fastjson.AppendFloat(b, *f), nil
}

// appendText appends t as json.Marshal writes a TextConfig.
func appendText(b []byte, t *TextConfig) ([]byte, error) {
	b = append(b, '{')
	if f := t.Format; f != nil {
		b = append(b, `"format":{"type":`...)
		b = fastjson.AppendString(b, f.Type)
		if f.Name != "" {
			b = append(b, `,"name":`...)
			b = fastjson.AppendString(b, f.Name)
		}
		if len(f.Schema) > 0 {
			var err error
			b = append(b, `,"schema":`...)
			if b, err = fastjson.AppendRaw(b, f.Schema); err != nil {
				return nil, err
			}
		}
		if f.Description != nil {
			b = append(b, `,"description":`...)
			b = fastjson.AppendString(b, *f.Description)
		}
		if f.Strict != nil {
			b = append(b, `,"strict":`...)
			b = strconv.AppendBool(b, *f.Strict)
		}
		b = append(b, '}')
	}
	if t.Verbosity != "" {
		if t.Format != nil {
			b = append(b, ',')
		}
		b = append(b, `"verbosity":`...)
		b = fastjson.AppendString(b, t.Verbosity)
	}
	return append(b, '}'), nil
}

func appendRaws(b []byte, raws []json.RawMessage) ([]byte, error) {
	if raws == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '[')
	for i, raw := range raws {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = fastjson.AppendRaw(b, raw); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

func appendUsage(b []byte, u *Usage) []byte {
	if u == nil {
		return append(b, "null"...)
	}
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, u.InputTokens, 10)
	b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, u.InputTokensDetails.CachedTokens, 10)
	b = append(b, `},"output_tokens":`...)
	b = strconv.AppendInt(b, u.OutputTokens, 10)
	b = append(b, `,"output_tokens_details":{"reasoning_tokens":`...)
	b = strconv.AppendInt(b, u.OutputTokensDetails.ReasoningTokens, 10)
	b = append(b, `},"total_tokens":`...)
	b = strconv.AppendInt(b, u.TotalTokens, 10)
	return append(b, '}')
}

// appendOutput appends the output items as their MarshalJSON methods
// write them.
func appendOutput(b []byte, items []OutputItem) []byte {
	if items == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = items[i].appendJSON(b)
	}
	return append(b, ']')
}

// appendJSON appends it as its MarshalJSON writes it.
func (it *OutputItem) appendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = fastjson.AppendString(b, it.ID)
	b = append(b, `,"type":`...)
	b = fastjson.AppendString(b, it.Type)
	b = append(b, `,"status":`...)
	b = fastjson.AppendString(b, it.Status)
	if it.Type == ItemFunctionCall {
		b = append(b, `,"arguments":`...)
		b = fastjson.AppendString(b, it.Arguments)
		b = append(b, `,"call_id":`...)
		b = fastjson.AppendString(b, it.CallID)
		b = append(b, `,"name":`...)
		b = fastjson.AppendString(b, it.Name)
		return append(b, '}')
	}
	b = append(b, `,"content":[`...)
	for i, p := range it.Content {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":`...)
		b = fastjson.AppendString(b, p.Type)
		if p.Type == PartRefusal {
			b = append(b, `,"refusal":`...)
			b = fastjson.AppendString(b, p.Refusal)
		} else {
			b = append(b, `,"annotations":[],"logprobs":[],"text":`...)
			b = fastjson.AppendString(b, p.Text)
		}
		b = append(b, '}')
	}
	b = append(b, `],"role":`...)
	b = fastjson.AppendString(b, it.Role)
	return append(b, '}')
}
