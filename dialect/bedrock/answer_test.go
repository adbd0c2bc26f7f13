package bedrock

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/weir-gateway/weir/internal/jsontest"
	"github.com/weir-gateway/weir/openaiwire"
)

var meta = Meta{ID: "chatcmpl-req1", Model: "anthropic.claude-3-haiku", Created: 1700000000}

func TestAnswerTranslatesAConverseOutput(t *testing.T) {
	t.Parallel()
	out := &bedrockruntime.ConverseOutput{
		Output: &types.ConverseOutputMemberMessage{Value: types.Message{Role: types.ConversationRoleAssistant, Content: []types.ContentBlock{
			&types.ContentBlockMemberReasoningContent{Value: &types.ReasoningContentBlockMemberReasoningText{Value: types.ReasoningTextBlock{Text: aws.String("hmm")}}},
			&types.ContentBlockMemberText{Value: "Let me "},
			&types.ContentBlockMemberText{Value: "look."},
			&types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{ToolUseId: aws.String("tooluse_a"), Name: aws.String("weather"),
				Input: document.NewLazyDocument(map[string]any{"city": "Paris"})}},
			&types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{ToolUseId: aws.String("tooluse_b"), Name: aws.String("time")}},
		}}},
		StopReason: types.StopReasonToolUse,
		Usage: &types.TokenUsage{InputTokens: aws.Int32(10), OutputTokens: aws.Int32(7), TotalTokens: aws.Int32(37),
			CacheReadInputTokens: aws.Int32(15), CacheWriteInputTokens: aws.Int32(5)},
	}
	got, err := Answer(out, meta)
	if err != nil {
		t.Fatal(err)
	}
	jsontest.Equal(t, got, `{"id":"chatcmpl-req1","object":"chat.completion","created":1700000000,"model":"anthropic.claude-3-haiku",
		"choices":[{"index":0,"message":{"role":"assistant","content":"Let me look.","refusal":null,"tool_calls":[
			{"id":"tooluse_a","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}},
			{"id":"tooluse_b","type":"function","function":{"name":"time","arguments":"{}"}}]},
		"logprobs":null,"finish_reason":"tool_calls"}],
		"usage":{"prompt_tokens":30,"completion_tokens":7,"total_tokens":37,"prompt_tokens_details":{"cached_tokens":15}}}`)
}

func TestAnswerWithoutTextHasNullContent(t *testing.T) {
	t.Parallel()
	out := &bedrockruntime.ConverseOutput{
		Output:     &types.ConverseOutputMemberMessage{Value: types.Message{Role: types.ConversationRoleAssistant}},
		StopReason: types.StopReasonGuardrailIntervened,
	}
	got, err := Answer(out, meta)
	if err != nil {
		t.Fatal(err)
	}
	jsontest.Equal(t, got, `{"id":"chatcmpl-req1","object":"chat.completion","created":1700000000,"model":"anthropic.claude-3-haiku",
		"choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null},"logprobs":null,"finish_reason":"content_filter"}]}`)
}

func TestFinishReason(t *testing.T) {
	t.Parallel()
	for reason, want := range map[types.StopReason]string{
		types.StopReasonEndTurn:                    "stop",
		types.StopReasonStopSequence:               "stop",
		types.StopReasonToolUse:                    "tool_calls",
		types.StopReasonMaxTokens:                  "length",
		types.StopReasonModelContextWindowExceeded: "length",
		types.StopReasonGuardrailIntervened:        "content_filter",
		types.StopReasonContentFiltered:            "content_filter",
		types.StopReasonMalformedToolUse:           "stop",
		"something_new":                            "stop",
	} {
		if got := FinishReason(reason); got != want {
			t.Errorf("FinishReason(%s) = %s, want %s", reason, got, want)
		}
	}
}

func TestUsageOf(t *testing.T) {
	t.Parallel()
	if UsageOf(nil) != nil {
		t.Error("no usage is not nil")
	}
	u := UsageOf(&types.TokenUsage{InputTokens: aws.Int32(3), OutputTokens: aws.Int32(4), TotalTokens: aws.Int32(7)})
	if *u != (openaiwire.Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}) {
		t.Errorf("usage %+v", *u)
	}
	u = UsageOf(&types.TokenUsage{InputTokens: aws.Int32(-3), OutputTokens: aws.Int32(4)})
	if *u != (openaiwire.Usage{CompletionTokens: 4, TotalTokens: 4}) {
		t.Errorf("negative input counted: %+v", *u)
	}
}

// TestRoundTripKeepsTextCallsAndIDs is a property: whatever text and tool
// calls an assistant turn holds, translated to Converse and answered back
// by a model that repeats them, the answer holds the same text, the same
// tool calls with the same ids and arguments, and the usage reported.
func TestRoundTripKeepsTextCallsAndIDs(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		words := []string{"a", "Ünïcode", "quote\"d", "new\nline", "tab\t", "<html>", "€", "back\\slash", "emoji 🙂"}
		return words[rng.IntN(len(words))]
	}
	for i := range 300 {
		var text string
		for range rng.IntN(4) {
			text += word() + " "
		}
		var calls []openaiwire.ToolCall
		for j := range rng.IntN(4) {
			var tc openaiwire.ToolCall
			tc.ID, tc.Type = fmt.Sprintf("tooluse_%d_%d", i, j), "function"
			tc.Function.Name = fmt.Sprintf("f%d", rng.IntN(3))
			args := map[string]any{"s": word(), "n": rng.Int64(), "f": rng.Float64(), "list": []any{word(), rng.IntN(10), nil, true}}
			b, _ := json.Marshal(args)
			tc.Function.Arguments = string(b)
			calls = append(calls, tc)
		}
		if text == "" && len(calls) == 0 {
			text = "x"
		}
		req, _ := json.Marshal(openaiwire.ChatRequest{Model: "m", Messages: []openaiwire.Message{
			{Role: "user", Content: openaiwire.TextContent("go")},
			{Role: "assistant", Content: openaiwire.TextContent(text), ToolCalls: calls},
		}})
		r, err := Decode(req)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		// The model says again what the assistant turn said.
		turn := r.Input.Messages[len(r.Input.Messages)-1]
		in, outTok := rng.Int32N(1000), rng.Int32N(1000)
		out := &bedrockruntime.ConverseOutput{
			Output:     &types.ConverseOutputMemberMessage{Value: turn},
			StopReason: types.StopReasonToolUse,
			Usage:      &types.TokenUsage{InputTokens: &in, OutputTokens: &outTok},
		}
		b, err := Answer(out, meta)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		var got openaiwire.ChatCompletion
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		m := got.Choices[0].Message
		if text != "" && m.Content.Text() != text {
			t.Fatalf("case %d: text %v, want %q", i, m.Content, text)
		}
		if len(m.ToolCalls) != len(calls) {
			t.Fatalf("case %d: %d calls, want %d", i, len(m.ToolCalls), len(calls))
		}
		for j, c := range m.ToolCalls {
			want := calls[j]
			if c.ID != want.ID || c.Function.Name != want.Function.Name {
				t.Errorf("case %d call %d: %s %s, want %s %s", i, j, c.ID, c.Function.Name, want.ID, want.Function.Name)
			}
			if !jsontest.Same([]byte(c.Function.Arguments), []byte(want.Function.Arguments)) {
				t.Errorf("case %d call %d: arguments %s, want %s", i, j, c.Function.Arguments, want.Function.Arguments)
			}
		}
		if u := got.Usage; u == nil || u.PromptTokens != int64(in) || u.CompletionTokens != int64(outTok) {
			t.Errorf("case %d: usage %+v, want %d + %d", i, got.Usage, in, outTok)
		}
	}
}
