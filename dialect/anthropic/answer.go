package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/weir-gateway/weir/openaiwire"
)

// AnswerToChat translates a Messages answer to a chat.completion: its
// text blocks joined as the content, its tool_use blocks as tool calls
// (ids kept, the input as the arguments), its thinking as
// reasoning_content, the stop reason as the finish reason, and the usage
// with prompt_tokens counting the cached input too (cache reads as
// cached_tokens). created is the answer's Unix time.
func AnswerToChat(body []byte, created int64) ([]byte, error) {
	var a Answer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("read a Messages answer: %w", err)
	}
	msg := openaiwire.AnswerMessage{Role: "assistant"}
	var text, thinking strings.Builder
	hasText := false
	for _, b := range a.Content {
		switch b.Type {
		case BlockText:
			text.WriteString(b.Text)
			hasText = true
		case BlockThinking:
			thinking.WriteString(b.Thinking)
		case BlockToolUse:
			args := b.Input
			if len(bytes.TrimSpace(args)) == 0 {
				args = json.RawMessage(`{}`)
			}
			msg.ToolCalls = append(msg.ToolCalls, openaiwire.ToolCall{ID: b.ID, Type: "function", Function: openaiwire.FunctionCall{Name: b.Name, Arguments: string(args)}})
		}
	}
	if hasText || len(msg.ToolCalls) == 0 {
		msg.Content = openaiwire.TextContent(text.String())
	}
	msg.ReasoningContent = thinking.String()
	finish := finishStop
	if a.StopReason != nil {
		finish = FinishReason(*a.StopReason)
	}
	out := openaiwire.ChatCompletion{
		ID:      a.ID,
		Object:  "chat.completion",
		Created: created,
		Model:   a.Model,
		Choices: []openaiwire.Choice{{Message: msg, FinishReason: &finish}},
		Usage:   chatUsageOf(a.Usage),
	}
	return json.Marshal(out)
}

// chatUsageOf is u in Chat Completions' terms: every input token, cached
// or not, is a prompt token.
func chatUsageOf(u Usage) *openaiwire.Usage {
	prompt := u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
	return &openaiwire.Usage{
		PromptTokens:        prompt,
		CompletionTokens:    u.OutputTokens,
		TotalTokens:         prompt + u.OutputTokens,
		PromptTokensDetails: openaiwire.PromptTokensDetails{CachedTokens: u.CacheReadInputTokens},
	}
}

// usageOfChat is a chat usage in Anthropic's terms: the cached prompt
// tokens are cache reads, the rest input.
func usageOfChat(u *openaiwire.Usage) Usage {
	if u == nil {
		return Usage{}
	}
	cached := min(u.PromptTokensDetails.CachedTokens, u.PromptTokens)
	return Usage{InputTokens: u.PromptTokens - cached, OutputTokens: u.CompletionTokens, CacheReadInputTokens: cached}
}

// AnswerFromChat translates a chat.completion to a Messages answer: its
// first choice's reasoning_content as a thinking block (unsigned), its
// content as a text block, its tool calls as tool_use blocks (ids kept;
// arguments that are not a JSON object become an empty input), the
// finish reason as the stop reason, and the usage with the cached prompt
// tokens as cache reads.
func AnswerFromChat(body []byte) ([]byte, error) {
	var in openaiwire.ChatCompletion
	if err := openaiwire.UnmarshalChatCompletion(body, &in); err != nil {
		return nil, fmt.Errorf("read a chat completion: %w", err)
	}
	out := Answer{ID: in.ID, Type: "message", Role: "assistant", Model: in.Model, Content: []Block{}, Usage: usageOfChat(in.Usage)}
	stop := StopEndTurn
	if len(in.Choices) > 0 {
		c := in.Choices[0]
		m := c.Message
		if m.ReasoningContent != "" {
			out.Content = append(out.Content, Block{Type: BlockThinking, Thinking: m.ReasoningContent})
		}
		if text := m.Content.Text(); text != "" {
			out.Content = append(out.Content, Block{Type: BlockText, Text: text})
		}
		for _, tc := range m.ToolCalls {
			out.Content = append(out.Content, Block{Type: BlockToolUse, ID: tc.ID, Name: tc.Function.Name, Input: toolInput(tc.Function.Arguments)})
		}
		if c.FinishReason != nil {
			stop = StopReason(*c.FinishReason)
		}
	}
	out.StopReason = &stop
	return out.appendJSON(make([]byte, 0, 512+len(body)))
}

// toolInput is a tool call's arguments as a tool_use input, which must
// be an object.
func toolInput(args string) json.RawMessage {
	a := bytes.TrimSpace([]byte(args))
	if len(a) == 0 || a[0] != '{' || !json.Valid(a) {
		return json.RawMessage(`{}`)
	}
	return a
}
