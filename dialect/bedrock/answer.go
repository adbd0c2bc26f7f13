package bedrock

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/weir-gateway/weir/openaiwire"
)

// Meta is what a translated answer says of itself that Converse does not
// send.
type Meta struct {
	// ID is the answer's id ("chatcmpl-..."), every chunk's in a stream.
	ID string
	// Model is the model the answer names: the request's.
	Model string
	// Created is the answer's Unix time in seconds.
	Created int64
}

// Answer translates a Converse answer to a chat.completion: its text
// blocks joined as the content, its tool uses as tool_calls (their ids
// kept), its stop reason as the finish reason and its usage as OpenAI's.
// Reasoning blocks are dropped: Chat Completions has no place for them.
func Answer(out *bedrockruntime.ConverseOutput, m Meta) ([]byte, error) {
	msg := openaiwire.AnswerMessage{Role: "assistant"}
	if o, ok := out.Output.(*types.ConverseOutputMemberMessage); ok {
		var text strings.Builder
		hasText := false
		for _, b := range o.Value.Content {
			switch b := b.(type) {
			case *types.ContentBlockMemberText:
				text.WriteString(b.Value)
				hasText = true
			case *types.ContentBlockMemberToolUse:
				args, err := documentJSON(b.Value.Input)
				if err != nil {
					return nil, fmt.Errorf("tool use %s: %w", deref(b.Value.ToolUseId), err)
				}
				msg.ToolCalls = append(msg.ToolCalls, openaiwire.ToolCall{
					ID:       deref(b.Value.ToolUseId),
					Type:     "function",
					Function: openaiwire.FunctionCall{Name: deref(b.Value.Name), Arguments: args},
				})
			}
		}
		if hasText {
			msg.Content = openaiwire.TextContent(text.String())
		}
	}
	finish := FinishReason(out.StopReason)
	c := openaiwire.ChatCompletion{
		ID:      m.ID,
		Object:  "chat.completion",
		Created: m.Created,
		Model:   m.Model,
		Choices: []openaiwire.Choice{{Message: msg, Logprobs: openaiwire.Null, FinishReason: &finish}},
		Usage:   UsageOf(out.Usage),
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// documentJSON is a tool use's input as the JSON text of a tool call's
// arguments; no input is an empty object.
func documentJSON(d interface{ MarshalSmithyDocument() ([]byte, error) }) (string, error) {
	if d == nil {
		return "{}", nil
	}
	b, err := d.MarshalSmithyDocument()
	if err != nil {
		return "", err
	}
	if len(b) == 0 || string(b) == "null" {
		return "{}", nil
	}
	return string(b), nil
}

// FinishReason maps Converse's stop reason to Chat Completions'.
func FinishReason(r types.StopReason) string {
	switch r {
	case types.StopReasonToolUse:
		return "tool_calls"
	case types.StopReasonMaxTokens, types.StopReasonModelContextWindowExceeded:
		return "length"
	case types.StopReasonGuardrailIntervened, types.StopReasonContentFiltered:
		return "content_filter"
	}
	return "stop" // end_turn, stop_sequence, and what is new or malformed
}

// UsageOf is Converse's usage in OpenAI's terms. Bedrock counts input
// read from and written to its prompt cache apart from inputTokens;
// OpenAI counts all input in prompt_tokens and what came from the cache
// again in cached_tokens. nil: no usage.
func UsageOf(u *types.TokenUsage) *openaiwire.Usage {
	if u == nil {
		return nil
	}
	n := func(p *int32) int64 {
		if p == nil || *p < 0 {
			return 0
		}
		return int64(*p)
	}
	cached := n(u.CacheReadInputTokens)
	prompt := n(u.InputTokens) + cached + n(u.CacheWriteInputTokens)
	completion := n(u.OutputTokens)
	return &openaiwire.Usage{
		PromptTokens:        prompt,
		CompletionTokens:    completion,
		TotalTokens:         prompt + completion,
		PromptTokensDetails: openaiwire.PromptTokensDetails{CachedTokens: cached},
	}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
