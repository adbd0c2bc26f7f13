package gateway

import (
	"bytes"
	"encoding/json"
	"math"
)

// usage is the part of an upstream answer that says what it cost: Chat
// Completions' usage, the Responses API's (a response object's, or in a
// stream the one its last event carries) or Anthropic's Messages API's
// (a message's; in a stream, message_start's and then message_delta's),
// whose input and output tokens usageOf reads as the prompt and
// completion tokens. Anthropic counts the input read from and written to
// its prompt cache apart from the rest: all of it is the prompt.
type usage struct {
	PromptTokens             int64 `json:"prompt_tokens"`
	CompletionTokens         int64 `json:"completion_tokens"`
	TotalTokens              int64 `json:"total_tokens"`
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// normal is u with the Responses API's or the Messages API's counts as
// Chat Completions'.
func (u usage) normal() usage {
	if u.PromptTokens == 0 && u.CompletionTokens == 0 {
		input := addTokens(max(u.InputTokens, 0), max(u.CacheCreationInputTokens, 0))
		u.PromptTokens, u.CompletionTokens = addTokens(input, max(u.CacheReadInputTokens, 0)), u.OutputTokens
	}
	u.InputTokens, u.OutputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens = 0, 0, 0, 0
	return u
}

// update is u updated by later, a Messages stream's message_delta
// usage: its counts are cumulative, and it may leave out the input ones
// that message_start gave.
func (u usage) update(later usage) usage {
	if later.PromptTokens > 0 {
		u.PromptTokens = later.PromptTokens
	}
	if later.CompletionTokens > 0 {
		u.CompletionTokens = later.CompletionTokens
	}
	if later.TotalTokens > 0 {
		u.TotalTokens = later.TotalTokens
	}
	return u
}

// total is what the answer cost; an upstream's numbers are trusted no
// more than a client's (negative ones count as none, the sum saturates).
func (u usage) total() int64 {
	if u.TotalTokens > 0 {
		return u.TotalTokens
	}
	return addTokens(max(u.PromptTokens, 0), max(u.CompletionTokens, 0))
}

// usageOf reads the usage field of a JSON answer (or SSE chunk).
func usageOf(body []byte) (usage, bool) {
	i := bytes.LastIndex(body, []byte(`"usage"`))
	if i < 0 {
		return usage{}, false
	}
	// OpenAI answers end with their usage: decode just the value after the
	// last "usage" key (a quote inside a string is escaped, so this is a
	// key), and parse the whole answer only if that does not work out.
	if rest := bytes.TrimLeft(body[i+len(`"usage"`):], " \t\r\n"); len(rest) > 0 && rest[0] == ':' {
		var u *usage
		if json.NewDecoder(bytes.NewReader(rest[1:])).Decode(&u) == nil && u != nil {
			if n := u.normal(); n.total() > 0 {
				return n, true
			}
		}
	}
	var v struct {
		Usage *usage `json:"usage"`
	}
	if json.Unmarshal(body, &v) != nil || v.Usage == nil {
		return usage{}, false
	}
	return v.Usage.normal(), true
}

// addTokens is a+b for token counts a, b >= 0, saturating at the int64
// maximum: a count that big can never be admitted against a TPM limit
// anyway, and one that wrapped negative would be refused as invalid.
func addTokens(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
