package gemini

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/weir-gateway/weir/openaiwire"
)

// BlockedError is a prompt Gemini blocked: it answered with no candidate
// and promptFeedback.blockReason.
type BlockedError struct {
	Reason string
}

func (e *BlockedError) Error() string {
	return "Gemini blocked the prompt (" + e.Reason + ")"
}

// AnswerMeta is what a chat answer says that Gemini's does not: its
// model when Gemini names none, and when it was made (Unix seconds).
type AnswerMeta struct {
	Model   string
	Created int64
}

// ToChat translates a generateContent answer into a chat.completion. A
// blocked prompt is a *BlockedError.
func ToChat(body []byte, meta AnswerMeta) ([]byte, error) {
	var r Response
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("gemini: decode the answer: %w", err)
	}
	if len(r.Candidates) == 0 && r.PromptFeedback != nil && r.PromptFeedback.BlockReason != "" {
		return nil, &BlockedError{Reason: r.PromptFeedback.BlockReason}
	}
	ids := newIDs(r.ResponseID)
	out := openaiwire.ChatCompletion{
		ID:      ids.completion(),
		Object:  "chat.completion",
		Created: meta.Created,
		Model:   modelOf(r, meta),
		Choices: []openaiwire.Choice{},
		Usage:   usageOf(r.UsageMetadata),
		// OpenAI names a fingerprint; Gemini has none to give.
		SystemFingerprint: openaiwire.Null,
	}
	for i, c := range r.Candidates {
		var text strings.Builder
		var calls []openaiwire.ToolCall
		if c.Content != nil {
			for _, p := range c.Content.Parts {
				switch {
				case p.FunctionCall != nil:
					calls = append(calls, toolCall(p, ids))
				case p.Text != "" && !p.Thought:
					text.WriteString(p.Text)
				}
			}
		}
		msg := openaiwire.AnswerMessage{Role: "assistant", ToolCalls: calls}
		if text.Len() > 0 || len(calls) == 0 {
			msg.Content = openaiwire.TextContent(text.String())
		}
		finish := FinishReason(c.FinishReason, len(calls) > 0)
		out.Choices = append(out.Choices, openaiwire.Choice{Index: i, Message: msg, FinishReason: &finish})
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("gemini: encode the answer: %w", err)
	}
	return b, nil
}

func modelOf(r Response, meta AnswerMeta) string {
	if r.ModelVersion != "" {
		return r.ModelVersion
	}
	return meta.Model
}

// toolCall is a function call part as a Chat Completions tool call,
// whole (as Gemini sends it, in streams too).
func toolCall(p Part, ids *idSource) openaiwire.ToolCall {
	fc := p.FunctionCall
	id := fc.ID
	if id == "" {
		id = ids.call()
	}
	args := string(fc.Args)
	if args == "" || args == "null" {
		args = "{}"
	}
	return openaiwire.ToolCall{ID: id, Type: "function", Function: openaiwire.FunctionCall{Name: fc.Name, Arguments: args},
		ExtraContent: signatureExtra(p.ThoughtSignature)}
}

// FinishReason maps Gemini's finish reason to Chat Completions': a stop
// with function calls is "tool_calls", the token limit "length", every
// block by a safety, recitation or policy filter "content_filter", and
// the rest (a malformed call, OTHER, none) "stop".
func FinishReason(reason string, calls bool) string {
	switch reason {
	case FinishMaxTokens:
		return "length"
	case FinishSafety, FinishRecitation, FinishBlocklist, FinishProhibitedContent, FinishSPII, FinishImageSafety:
		return "content_filter"
	}
	if calls {
		return "tool_calls"
	}
	return "stop"
}

// usageOf is Gemini's usage in Chat Completions' terms: the thinking
// counts as completion (its reasoning tokens), the tool-use prompt as
// prompt, the cached prompt as cached tokens.
func usageOf(u *UsageMetadata) *openaiwire.Usage {
	if u == nil {
		return nil
	}
	prompt := u.PromptTokenCount + u.ToolUsePromptTokenCount
	completion := u.CandidatesTokenCount + u.ThoughtsTokenCount
	total := u.TotalTokenCount
	if total < prompt+completion {
		total = prompt + completion
	}
	return &openaiwire.Usage{
		PromptTokens: prompt, CompletionTokens: completion, TotalTokens: total,
		PromptTokensDetails:     openaiwire.PromptTokensDetails{CachedTokens: u.CachedContentTokenCount},
		CompletionTokensDetails: &openaiwire.CompletionTokensDetails{ReasoningTokens: u.ThoughtsTokenCount},
	}
}

// idSource names an answer and the tool calls Gemini gave no id: after
// its responseId when there is one, so that one answer's names are
// stable, else at random. A call's id must differ from every other in
// the conversation: the results that answer it find their function by
// it.
type idSource struct {
	base  string
	calls int
}

func newIDs(responseID string) *idSource {
	if responseID == "" {
		var b [12]byte
		_, _ = rand.Read(b[:]) // never fails
		responseID = hex.EncodeToString(b[:])
	}
	return &idSource{base: responseID}
}

func (s *idSource) completion() string { return "chatcmpl-" + s.base }

func (s *idSource) call() string {
	s.calls++
	return "call_" + s.base + "_" + strconv.Itoa(s.calls)
}
