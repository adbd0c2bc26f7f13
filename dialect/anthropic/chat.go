package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
)

// The Chat Completions shapes the translations read and write: the
// fields they translate, nothing more. Unknown fields of a body read are
// ignored.

type chatRequest struct {
	Model               string             `json:"model"`
	Messages            []chatMessage      `json:"messages"`
	MaxTokens           *int64             `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int64             `json:"max_completion_tokens,omitempty"`
	Temperature         *float64           `json:"temperature,omitempty"`
	TopP                *float64           `json:"top_p,omitempty"`
	TopK                *int64             `json:"top_k,omitempty"`
	Stop                json.RawMessage    `json:"stop,omitempty"`
	Stream              bool               `json:"stream,omitempty"`
	StreamOptions       *chatStreamOptions `json:"stream_options,omitempty"`
	Tools               []chatTool         `json:"tools,omitempty"`
	ToolChoice          json.RawMessage    `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool              `json:"parallel_tool_calls,omitempty"`
	User                string             `json:"user,omitempty"`

	// Read only, to refuse what cannot be translated.
	N              *int `json:"n,omitempty"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format,omitempty"`
	Logprobs     bool            `json:"logprobs,omitempty"`
	Functions    json.RawMessage `json:"functions,omitempty"`
	FunctionCall json.RawMessage `json:"function_call,omitempty"`
	Modalities   []string        `json:"modalities,omitempty"`
}

type chatStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role       string         `json:"role"`
	Content    chatContent    `json:"content"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	// ReasoningContent is the reasoning some Chat Completions upstreams
	// (DeepSeek, vLLM) answer beside the content.
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

// chatContent is a message's content: a string, parts, or null.
type chatContent struct {
	Text  *string
	Parts []chatPart
}

func textContent(s string) chatContent { return chatContent{Text: &s} }

func (c chatContent) MarshalJSON() ([]byte, error) {
	switch {
	case c.Parts != nil:
		return json.Marshal(c.Parts)
	case c.Text != nil:
		return json.Marshal(*c.Text)
	}
	return []byte("null"), nil
}

func (c *chatContent) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*c = chatContent{}
	switch {
	case len(b) == 0 || bytes.Equal(b, []byte("null")):
		return nil
	case b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		c.Text = &s
		return nil
	case b[0] == '[':
		return json.Unmarshal(b, &c.Parts)
	}
	return errors.New("content must be a string, an array of parts or null")
}

// text is the content's text: the string, or its text parts joined.
func (c chatContent) text() string {
	if c.Text != nil {
		return *c.Text
	}
	var s string
	for _, p := range c.Parts {
		if p.Type == "text" {
			s += p.Text
		}
	}
	return s
}

type chatPart struct {
	Type     string        `json:"type"`
	Text     string        `json:"text,omitempty"`
	ImageURL *chatImageURL `json:"image_url,omitempty"`
	Refusal  string        `json:"refusal,omitempty"`
}

func (p chatPart) MarshalJSON() ([]byte, error) {
	if p.Type == "text" {
		return json.Marshal(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{p.Type, p.Text})
	}
	type plain chatPart
	return json.Marshal(plain(p))
}

type chatImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

type chatToolCall struct {
	Index    *int             `json:"index,omitempty"`
	ID       string           `json:"id,omitempty"`
	Type     string           `json:"type,omitempty"`
	Function chatFunctionCall `json:"function"`
}

type chatFunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// chatAnswer is a chat.completion, or (with Delta in its choices) a
// chat.completion.chunk.
type chatAnswer struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *chatUsage   `json:"usage,omitempty"`
	// Error is an error event inside an OpenAI stream.
	Error *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	} `json:"error,omitempty"`
}

type chatChoice struct {
	Index        int          `json:"index"`
	Message      *chatMessage `json:"message,omitempty"`
	Delta        *chatDelta   `json:"delta,omitempty"`
	Logprobs     *struct{}    `json:"logprobs"`
	FinishReason *string      `json:"finish_reason"`
}

type chatDelta struct {
	Role             string         `json:"role,omitempty"`
	Content          *string        `json:"content,omitempty"`
	ReasoningContent *string        `json:"reasoning_content,omitempty"`
	ToolCalls        []chatToolCall `json:"tool_calls,omitempty"`
}

type chatUsage struct {
	PromptTokens        int64              `json:"prompt_tokens"`
	CompletionTokens    int64              `json:"completion_tokens"`
	TotalTokens         int64              `json:"total_tokens"`
	PromptTokensDetails *chatPromptDetails `json:"prompt_tokens_details,omitempty"`
}

type chatPromptDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

// Chat Completions finish reasons.
const (
	finishStop          = "stop"
	finishLength        = "length"
	finishToolCalls     = "tool_calls"
	finishFunctionCall  = "function_call"
	finishContentFilter = "content_filter"
)

// FinishReason is the Chat Completions finish_reason of a stop reason.
func FinishReason(stop string) string {
	switch stop {
	case StopMaxTokens, StopContextExceeded:
		return finishLength
	case StopToolUse:
		return finishToolCalls
	case StopRefusal:
		return finishContentFilter
	}
	return finishStop // end_turn, stop_sequence, pause_turn
}

// StopReason is the stop reason of a Chat Completions finish_reason.
func StopReason(finish string) string {
	switch finish {
	case finishLength:
		return StopMaxTokens
	case finishToolCalls, finishFunctionCall:
		return StopToolUse
	case finishContentFilter:
		return StopRefusal
	}
	return StopEndTurn
}
