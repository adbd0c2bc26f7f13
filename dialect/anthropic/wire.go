package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Version is the anthropic-version header value the translations speak.
const Version = "2023-06-01"

// Request is a Messages request (POST /v1/messages, and without
// max_tokens and stream, POST /v1/messages/count_tokens).
type Request struct {
	Model         string          `json:"model"`
	MaxTokens     int64           `json:"max_tokens,omitempty"`
	System        Content         `json:"system,omitempty"`
	Messages      []Message       `json:"messages"`
	Tools         []Tool          `json:"tools,omitempty"`
	ToolChoice    *ToolChoice     `json:"tool_choice,omitempty"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Temperature   *float64        `json:"temperature,omitempty"`
	TopP          *float64        `json:"top_p,omitempty"`
	TopK          *int64          `json:"top_k,omitempty"`
	Metadata      *Metadata       `json:"metadata,omitempty"`
	Stream        bool            `json:"stream,omitempty"`
	Thinking      json.RawMessage `json:"thinking,omitempty"`
}

// Message is one turn of a conversation: "user" or "assistant".
type Message struct {
	Role    string  `json:"role"`
	Content Content `json:"content"`
}

// Metadata is the request's metadata: an opaque id of the end user.
type Metadata struct {
	UserID string `json:"user_id,omitempty"`
}

// Tool is a tool the model may call. A client tool has no type (or
// "custom") and an input_schema; Anthropic's server tools have a
// versioned type ("web_search_20250305") and are not translated.
type Tool struct {
	Type         string          `json:"type,omitempty"`
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// IsClientTool reports whether t is a tool the client runs, which Chat
// Completions can say.
func (t Tool) IsClientTool() bool { return t.Type == "" || t.Type == "custom" }

// ToolChoice is how the model is to use the tools: "auto", "any" (some
// tool), "tool" (the one named) or "none".
type ToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

// Content is a message's content or a system prompt. It reads a string
// as one text block, and is always written as blocks.
type Content []Block

// UnmarshalJSON reads a string or an array of blocks.
func (c *Content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || bytes.Equal(b, []byte("null")):
		*c = nil
		return nil
	case b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = Content{{Type: BlockText, Text: s}}
		return nil
	case b[0] == '[':
		var blocks []Block
		if err := json.Unmarshal(b, &blocks); err != nil {
			return err
		}
		*c = blocks
		return nil
	}
	return errors.New("content must be a string or an array of content blocks")
}

// Content block types.
const (
	BlockText             = "text"
	BlockImage            = "image"
	BlockToolUse          = "tool_use"
	BlockToolResult       = "tool_result"
	BlockThinking         = "thinking"
	BlockRedactedThinking = "redacted_thinking"
)

// Block is one content block; which fields it has depends on its Type.
type Block struct {
	Type string `json:"type"`
	// Text: a text block's text.
	Text string `json:"text,omitempty"`
	// Source: an image's bytes (base64) or URL.
	Source *Source `json:"source,omitempty"`
	// ID, Name and Input: a tool_use block's call.
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// ToolUseID, Content and IsError: a tool_result block's answer to
	// the call ToolUseID; Content is a string or blocks (text, image).
	ToolUseID string  `json:"tool_use_id,omitempty"`
	Content   Content `json:"content,omitempty"`
	IsError   bool    `json:"is_error,omitempty"`
	// Thinking and Signature: a thinking block; Data: a
	// redacted_thinking block's encrypted thinking.
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`
	// CacheControl marks a prompt-caching breakpoint; passed through
	// where the block is.
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// MarshalJSON writes the fields of b's type, empty ones included where
// Anthropic sends them (a text block's "text", a tool_use's "input").
func (b Block) MarshalJSON() ([]byte, error) {
	cc := b.CacheControl
	switch b.Type {
	case BlockText:
		return json.Marshal(struct {
			Type         string          `json:"type"`
			Text         string          `json:"text"`
			CacheControl json.RawMessage `json:"cache_control,omitempty"`
		}{b.Type, b.Text, cc})
	case BlockToolUse:
		in := b.Input
		if len(in) == 0 {
			in = json.RawMessage(`{}`)
		}
		return json.Marshal(struct {
			Type         string          `json:"type"`
			ID           string          `json:"id"`
			Name         string          `json:"name"`
			Input        json.RawMessage `json:"input"`
			CacheControl json.RawMessage `json:"cache_control,omitempty"`
		}{b.Type, b.ID, b.Name, in, cc})
	case BlockThinking:
		return json.Marshal(struct {
			Type      string `json:"type"`
			Thinking  string `json:"thinking"`
			Signature string `json:"signature"`
		}{b.Type, b.Thinking, b.Signature})
	case BlockRedactedThinking:
		return json.Marshal(struct {
			Type string `json:"type"`
			Data string `json:"data"`
		}{b.Type, b.Data})
	case BlockToolResult:
		return json.Marshal(struct {
			Type         string          `json:"type"`
			ToolUseID    string          `json:"tool_use_id"`
			Content      Content         `json:"content,omitempty"`
			IsError      bool            `json:"is_error,omitempty"`
			CacheControl json.RawMessage `json:"cache_control,omitempty"`
		}{b.Type, b.ToolUseID, b.Content, b.IsError, cc})
	}
	type plain Block // every field, as tagged: no MarshalJSON
	return json.Marshal(plain(b))
}

// Source is where an image's bytes are: "base64" (MediaType and Data) or
// "url".
type Source struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// Answer is a Messages answer: the assistant's message.
type Answer struct {
	ID           string  `json:"id"`
	Type         string  `json:"type"` // "message"
	Role         string  `json:"role"` // "assistant"
	Model        string  `json:"model"`
	Content      []Block `json:"content"`
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        Usage   `json:"usage"`
}

// Usage is what a message cost. Input tokens exclude those read from or
// written to the prompt cache, which are counted apart.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// Stop reasons.
const (
	StopEndTurn         = "end_turn"
	StopMaxTokens       = "max_tokens"
	StopSequence        = "stop_sequence"
	StopToolUse         = "tool_use"
	StopPauseTurn       = "pause_turn"
	StopRefusal         = "refusal"
	StopContextExceeded = "model_context_window_exceeded"
)

// Stream event types.
const (
	EventMessageStart      = "message_start"
	EventContentBlockStart = "content_block_start"
	EventContentBlockDelta = "content_block_delta"
	EventContentBlockStop  = "content_block_stop"
	EventMessageDelta      = "message_delta"
	EventMessageStop       = "message_stop"
	EventPing              = "ping"
	EventError             = "error"
)

// Delta types of content_block_delta.
const (
	DeltaText      = "text_delta"
	DeltaInputJSON = "input_json_delta"
	DeltaThinking  = "thinking_delta"
	DeltaSignature = "signature_delta"
)

// Event is one stream event, as read: the fields of every type.
type Event struct {
	Type         string       `json:"type"`
	Message      *Answer      `json:"message,omitempty"`
	Index        int          `json:"index"`
	ContentBlock *Block       `json:"content_block,omitempty"`
	Delta        *Delta       `json:"delta,omitempty"`
	Usage        *DeltaUsage  `json:"usage,omitempty"`
	Error        *ErrorDetail `json:"error,omitempty"`
}

// Delta is a content_block_delta's or a message_delta's delta.
type Delta struct {
	Type        string  `json:"type,omitempty"`
	Text        string  `json:"text,omitempty"`
	PartialJSON string  `json:"partial_json,omitempty"`
	Thinking    string  `json:"thinking,omitempty"`
	Signature   string  `json:"signature,omitempty"`
	StopReason  *string `json:"stop_reason,omitempty"`
	// StopSequence is the stop sequence met, if one ended the message.
	StopSequence *string `json:"stop_sequence,omitempty"`
}

// DeltaUsage is a message_delta's usage: cumulative counts, the input
// ones only where the upstream sends them.
type DeltaUsage struct {
	InputTokens              *int64 `json:"input_tokens,omitempty"`
	OutputTokens             int64  `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens,omitempty"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens,omitempty"`
}

// ErrorBody is Anthropic's error answer:
// {"type": "error", "error": {"type", "message"}, "request_id"}.
type ErrorBody struct {
	Type      string      `json:"type"`
	Error     ErrorDetail `json:"error"`
	RequestID string      `json:"request_id,omitempty"`
}

// ErrorDetail is the error of an ErrorBody or an error event. Code is
// Weir's own error code where Weir answered the error; Anthropic's
// clients ignore it.
type ErrorDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Code    string `json:"code,omitempty"`
}

// CountTokens is the answer of POST /v1/messages/count_tokens.
type CountTokens struct {
	InputTokens int64 `json:"input_tokens"`
}
