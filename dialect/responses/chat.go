package responses

import (
	"bytes"
	"encoding/json"
)

// The Chat Completions wire types the translation writes and reads: the
// subset a Responses request and its answer map onto.

type chatRequest struct {
	Model                string              `json:"model"`
	Messages             []chatMessage       `json:"messages"`
	Tools                []chatTool          `json:"tools,omitempty"`
	ToolChoice           any                 `json:"tool_choice,omitempty"`
	ParallelToolCalls    *bool               `json:"parallel_tool_calls,omitempty"`
	ResponseFormat       *chatResponseFormat `json:"response_format,omitempty"`
	MaxCompletionTokens  *int64              `json:"max_completion_tokens,omitempty"`
	Temperature          *float64            `json:"temperature,omitempty"`
	TopP                 *float64            `json:"top_p,omitempty"`
	FrequencyPenalty     *float64            `json:"frequency_penalty,omitempty"`
	PresencePenalty      *float64            `json:"presence_penalty,omitempty"`
	Stream               bool                `json:"stream,omitempty"`
	StreamOptions        *chatStreamOptions  `json:"stream_options,omitempty"`
	User                 string              `json:"user,omitempty"`
	ReasoningEffort      string              `json:"reasoning_effort,omitempty"`
	Verbosity            string              `json:"verbosity,omitempty"`
	ServiceTier          string              `json:"service_tier,omitempty"`
	PromptCacheKey       string              `json:"prompt_cache_key,omitempty"`
	PromptCacheRetention string              `json:"prompt_cache_retention,omitempty"`
	SafetyIdentifier     string              `json:"safety_identifier,omitempty"`
}

type chatStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role string `json:"role"`
	// Content is a string, a list of chatParts, or nil (an assistant
	// message of tool calls only).
	Content    any            `json:"content"`
	Refusal    string         `json:"refusal,omitempty"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type chatPart struct {
	Type     string        `json:"type"`
	Text     string        `json:"text,omitempty"`
	ImageURL *chatImageURL `json:"image_url,omitempty"`
	File     *chatFile     `json:"file,omitempty"`
}

type chatImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

type chatFile struct {
	FileID   string `json:"file_id,omitempty"`
	FileData string `json:"file_data,omitempty"`
	Filename string `json:"filename,omitempty"`
}

type chatToolCall struct {
	// Index is a streamed tool call's position among the message's.
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string          `json:"type"`
	Function chatFunctionDef `json:"function"`
}

type chatFunctionDef struct {
	Name        string          `json:"name"`
	Description *string         `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

type chatResponseFormat struct {
	Type       string          `json:"type"`
	JSONSchema *chatJSONSchema `json:"json_schema,omitempty"`
}

type chatJSONSchema struct {
	Name        string          `json:"name"`
	Schema      json.RawMessage `json:"schema"`
	Description *string         `json:"description,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// chatCompletion is a Chat Completions answer, or one chunk of a
// streamed one (whose choices carry a Delta in place of a Message).
type chatCompletion struct {
	ID          string       `json:"id"`
	Model       string       `json:"model"`
	Choices     []chatChoice `json:"choices"`
	Usage       *chatUsage   `json:"usage"`
	ServiceTier string       `json:"service_tier"`
}

type chatChoice struct {
	Index        int        `json:"index"`
	Message      chatAnswer `json:"message"`
	Delta        chatAnswer `json:"delta"`
	FinishReason string     `json:"finish_reason"`
}

type chatAnswer struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	Refusal   *string        `json:"refusal"`
	ToolCalls []chatToolCall `json:"tool_calls"`
}

type chatUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// usage is u in the Responses API's terms.
func (u *chatUsage) usage() *Usage {
	if u == nil {
		return nil
	}
	out := &Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	if out.TotalTokens == 0 {
		out.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	if d := u.PromptTokensDetails; d != nil {
		out.InputTokensDetails.CachedTokens = d.CachedTokens
	}
	if d := u.CompletionTokensDetails; d != nil {
		out.OutputTokensDetails.ReasoningTokens = d.ReasoningTokens
	}
	return out
}

// ChatBody is r as a Chat Completions request body: instructions first as
// a system message, then the input's items in order (a developer
// message as a system one, function_call items joined to the assistant
// message before them, function_call_output items as tool messages), its
// function tools and tool choice, text.format as response_format,
// max_output_tokens as max_completion_tokens, and the sampling and
// routing fields as they are. A stream asks for its usage
// (stream_options.include_usage), which the response's usage needs.
func (r *Request) ChatBody() ([]byte, error) {
	c := chatRequest{
		Model:                r.Model,
		MaxCompletionTokens:  r.MaxOutputTokens,
		Temperature:          r.Temperature,
		TopP:                 r.TopP,
		FrequencyPenalty:     r.FrequencyPenalty,
		PresencePenalty:      r.PresencePenalty,
		Stream:               r.Stream,
		User:                 r.User,
		ServiceTier:          r.ServiceTier,
		PromptCacheKey:       r.PromptCacheKey,
		PromptCacheRetention: r.PromptCacheRetention,
		SafetyIdentifier:     r.SafetyIdentifier,
	}
	if r.Stream {
		c.StreamOptions = &chatStreamOptions{IncludeUsage: true}
	}
	if r.Instructions != nil && *r.Instructions != "" {
		c.Messages = append(c.Messages, chatMessage{Role: "system", Content: *r.Instructions})
	}
	if r.Input.IsText {
		c.Messages = append(c.Messages, chatMessage{Role: "user", Content: r.Input.Text})
	}
	for _, it := range r.Input.Items {
		c.Messages = appendItem(c.Messages, it)
	}
	for _, t := range r.Tools {
		c.Tools = append(c.Tools, chatTool{Type: "function", Function: chatFunctionDef{
			Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}})
	}
	if len(c.Tools) > 0 {
		// Chat Completions takes parallel_tool_calls only beside tools.
		c.ParallelToolCalls = r.ParallelToolCalls
	}
	var err *Error
	if c.ToolChoice, err = chatToolChoice(r.ToolChoice); err != nil {
		return nil, err
	}
	if r.Text != nil {
		c.Verbosity = r.Text.Verbosity
		if f := r.Text.Format; f != nil {
			switch f.Type {
			case "json_object":
				c.ResponseFormat = &chatResponseFormat{Type: "json_object"}
			case "json_schema":
				c.ResponseFormat = &chatResponseFormat{Type: "json_schema", JSONSchema: &chatJSONSchema{
					Name: f.Name, Schema: f.Schema, Description: f.Description, Strict: f.Strict}}
			}
		}
	}
	if r.Reasoning != nil && r.Reasoning.Effort != nil {
		c.ReasoningEffort = *r.Reasoning.Effort
	}
	return json.Marshal(c)
}

// appendItem appends the Chat Completions message of one input item
// to msgs.
func appendItem(msgs []chatMessage, it Item) []chatMessage {
	switch it.Type {
	case "function_call":
		call := chatToolCall{ID: it.CallID, Type: "function", Function: chatFunction{Name: it.Name, Arguments: it.Arguments}}
		if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
			// A call made beside the text before it, or beside other
			// calls: one assistant message, as Chat Completions has it.
			msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, call)
			return msgs
		}
		return append(msgs, chatMessage{Role: "assistant", ToolCalls: []chatToolCall{call}})
	case "function_call_output":
		return append(msgs, chatMessage{Role: "tool", ToolCallID: it.CallID, Content: chatContent(it.Output)})
	}
	role := it.Role
	if role == "developer" {
		// Chat Completions servers other than OpenAI's may not know the
		// developer role; OpenAI's takes system for it.
		role = "system"
	}
	m := chatMessage{Role: role}
	if role != "assistant" {
		m.Content = chatContent(it.Content)
		return append(msgs, m)
	}
	// An assistant message: its output_text parts are its text, a
	// refusal its refusal.
	if it.Content.IsText {
		m.Content = it.Content.Text
		return append(msgs, m)
	}
	var text []byte
	for _, p := range it.Content.Parts {
		if p.Type == "refusal" {
			m.Refusal += p.Refusal
			continue
		}
		text = append(text, p.Text...)
	}
	if len(text) > 0 || m.Refusal == "" {
		m.Content = string(text)
	}
	return append(msgs, m)
}

// chatContent is a message's content (or a call's output) in Chat
// Completions: a string as it is, parts as text, image_url and file
// parts.
func chatContent(c Content) any {
	if c.IsText {
		return c.Text
	}
	parts := make([]chatPart, 0, len(c.Parts))
	for _, p := range c.Parts {
		switch p.Type {
		case "input_image":
			parts = append(parts, chatPart{Type: "image_url", ImageURL: &chatImageURL{URL: p.ImageURL, Detail: p.Detail}})
		case "input_file":
			parts = append(parts, chatPart{Type: "file", File: &chatFile{FileID: p.FileID, FileData: p.FileData, Filename: p.Filename}})
		default:
			parts = append(parts, chatPart{Type: "text", Text: p.Text})
		}
	}
	return parts
}

// chatToolChoice is a Responses tool_choice in Chat Completions: the
// strings as they are, a function by name as {"type":"function",
// "function":{"name"}}. nil when the request leaves it out.
func chatToolChoice(raw json.RawMessage) (any, *Error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "none", "auto", "required":
			return s, nil
		}
		return nil, invalid("tool_choice", "tool_choice must be none, auto, required or a function, not %q", s)
	}
	var fn struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &fn) != nil {
		return nil, invalid("tool_choice", "tool_choice must be a string or an object")
	}
	switch fn.Type {
	case "function":
		if fn.Name == "" {
			return nil, invalid("tool_choice.name", "a function tool_choice must name the function")
		}
		return map[string]any{"type": "function", "function": map[string]string{"name": fn.Name}}, nil
	case "":
		return nil, invalid("tool_choice.type", "tool_choice must have a type")
	}
	return nil, unsupported("tool_choice.type", "a tool_choice of type %s is not translated to Chat Completions: only functions are", fn.Type)
}
