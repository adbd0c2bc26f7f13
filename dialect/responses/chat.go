package responses

import (
	"bytes"
	"encoding/json"

	"github.com/weir-gateway/weir/openaiwire"
)

// The Chat Completions wire types the translation writes and reads: the
// subset a Responses request and its answer map onto.

// usageOf is u in the Responses API's terms.
func usageOf(u *openaiwire.Usage) *Usage {
	if u == nil {
		return nil
	}
	out := &Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	if out.TotalTokens == 0 {
		out.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	out.InputTokensDetails.CachedTokens = u.PromptTokensDetails.CachedTokens
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
	c, err := r.ChatRequest()
	if err != nil {
		return nil, err
	}
	return c.Marshal()
}

// ChatRequest is ChatBody's translation before it is encoded, for a
// caller that reads the fields it needs from it rather than parsing the
// body again.
func (r *Request) ChatRequest() (*openaiwire.ChatRequest, error) {
	c := &openaiwire.ChatRequest{
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
		c.StreamOptions = &openaiwire.StreamOptions{IncludeUsage: true}
	}
	if r.Instructions != nil && *r.Instructions != "" {
		c.Messages = append(c.Messages, openaiwire.Message{Role: "system", Content: openaiwire.TextContent(*r.Instructions)})
	}
	if r.Input.IsText {
		c.Messages = append(c.Messages, openaiwire.Message{Role: "user", Content: openaiwire.TextContent(r.Input.Text)})
	}
	for _, it := range r.Input.Items {
		c.Messages = appendItem(c.Messages, it)
	}
	for _, t := range r.Tools {
		c.Tools = append(c.Tools, openaiwire.Tool{Type: "function", Function: openaiwire.Function{
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
				c.ResponseFormat = &openaiwire.ResponseFormat{Type: "json_object"}
			case "json_schema":
				c.ResponseFormat = &openaiwire.ResponseFormat{Type: "json_schema", JSONSchema: &openaiwire.JSONSchema{
					Name: f.Name, Schema: f.Schema, Description: f.Description, Strict: f.Strict}}
			}
		}
	}
	if r.Reasoning != nil && r.Reasoning.Effort != nil {
		c.ReasoningEffort = *r.Reasoning.Effort
	}
	return c, nil
}

// appendItem appends the Chat Completions message of one input item
// to msgs.
func appendItem(msgs []openaiwire.Message, it Item) []openaiwire.Message {
	switch it.Type {
	case "function_call":
		call := openaiwire.ToolCall{ID: it.CallID, Type: "function", Function: openaiwire.FunctionCall{Name: it.Name, Arguments: it.Arguments}}
		if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
			// A call made beside the text before it, or beside other
			// calls: one assistant message, as Chat Completions has it.
			msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, call)
			return msgs
		}
		return append(msgs, openaiwire.Message{Role: "assistant", ToolCalls: []openaiwire.ToolCall{call}})
	case "function_call_output":
		return append(msgs, openaiwire.Message{Role: "tool", ToolCallID: it.CallID, Content: chatContent(it.Output)})
	}
	role := it.Role
	if role == "developer" {
		// Chat Completions servers other than OpenAI's may not know the
		// developer role; OpenAI's takes system for it.
		role = "system"
	}
	m := openaiwire.Message{Role: role}
	if role != "assistant" {
		m.Content = chatContent(it.Content)
		return append(msgs, m)
	}
	// An assistant message: its output_text parts are its text, a
	// refusal its refusal.
	if it.Content.IsText {
		m.Content = openaiwire.TextContent(it.Content.Text)
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
		m.Content = openaiwire.TextContent(string(text))
	}
	return append(msgs, m)
}

// chatContent is a message's content (or a call's output) in Chat
// Completions: a string as it is, parts as text, image_url and file
// parts.
func chatContent(c Content) openaiwire.Content {
	if c.IsText {
		return openaiwire.TextContent(c.Text)
	}
	parts := make([]openaiwire.Part, 0, len(c.Parts))
	for _, p := range c.Parts {
		switch p.Type {
		case "input_image":
			parts = append(parts, openaiwire.Part{Type: "image_url", ImageURL: &openaiwire.ImageURL{URL: p.ImageURL, Detail: p.Detail}})
		case "input_file":
			parts = append(parts, openaiwire.Part{Type: "file", File: &openaiwire.File{FileID: p.FileID, FileData: p.FileData, Filename: p.Filename}})
		default:
			parts = append(parts, openaiwire.Part{Type: "text", Text: p.Text})
		}
	}
	return openaiwire.PartsContent(parts)
}

// chatToolChoice is a Responses tool_choice in Chat Completions: the
// strings as they are, a function by name as {"type":"function",
// "function":{"name"}}. nil when the request leaves it out.
func chatToolChoice(raw json.RawMessage) (json.RawMessage, *Error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "none", "auto", "required":
			b, _ := json.Marshal(s) // a string: cannot fail
			return b, nil
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
		b, _ := json.Marshal(openaiwire.FunctionChoice(fn.Name)) // a string: cannot fail
		return b, nil
	case "":
		return nil, invalid("tool_choice.type", "tool_choice must have a type")
	}
	return nil, unsupported("tool_choice.type", "a tool_choice of type %s is not translated to Chat Completions: only functions are", fn.Type)
}
