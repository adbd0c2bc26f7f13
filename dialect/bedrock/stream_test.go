package bedrock

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/weir-gateway/weir/internal/jsontest"
)

// events splits SSE bytes into their data payloads.
func events(t *testing.T, b []byte) []string {
	t.Helper()
	s := string(b)
	if s == "" {
		return nil
	}
	if !strings.HasSuffix(s, "\n\n") {
		t.Fatalf("not whole SSE events: %q", s)
	}
	var out []string
	for _, ev := range strings.Split(strings.TrimSuffix(s, "\n\n"), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("bad SSE event %q", ev)
		}
		out = append(out, data)
	}
	return out
}

const chunkHead = `"id":"chatcmpl-req1","object":"chat.completion.chunk","created":1700000000,"model":"anthropic.claude-3-haiku"`

func chunkJSON(delta, finish string) string {
	return `{` + chunkHead + `,"choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + `}]}`
}

func TestStreamTranslatesEventByEvent(t *testing.T) {
	t.Parallel()
	usage := &types.TokenUsage{InputTokens: aws.Int32(12), OutputTokens: aws.Int32(5), TotalTokens: aws.Int32(17), CacheReadInputTokens: aws.Int32(4)}
	steps := []struct {
		ev   types.ConverseStreamOutput
		want []string
	}{
		{&types.ConverseStreamOutputMemberMessageStart{Value: types.MessageStartEvent{Role: types.ConversationRoleAssistant}},
			[]string{chunkJSON(`{"role":"assistant","content":""}`, "null")}},
		{&types.ConverseStreamOutputMemberContentBlockDelta{Value: types.ContentBlockDeltaEvent{ContentBlockIndex: aws.Int32(0),
			Delta: &types.ContentBlockDeltaMemberText{Value: "Hel"}}},
			[]string{chunkJSON(`{"content":"Hel"}`, "null")}},
		{&types.ConverseStreamOutputMemberContentBlockDelta{Value: types.ContentBlockDeltaEvent{ContentBlockIndex: aws.Int32(0),
			Delta: &types.ContentBlockDeltaMemberText{Value: "lo \"you\""}}},
			[]string{chunkJSON(`{"content":"lo \"you\""}`, "null")}},
		{&types.ConverseStreamOutputMemberContentBlockDelta{Value: types.ContentBlockDeltaEvent{ContentBlockIndex: aws.Int32(0),
			Delta: &types.ContentBlockDeltaMemberReasoningContent{Value: &types.ReasoningContentBlockDeltaMemberText{Value: "thinking"}}}},
			nil},
		{&types.ConverseStreamOutputMemberContentBlockStop{Value: types.ContentBlockStopEvent{ContentBlockIndex: aws.Int32(0)}}, nil},
		{&types.ConverseStreamOutputMemberContentBlockStart{Value: types.ContentBlockStartEvent{ContentBlockIndex: aws.Int32(1),
			Start: &types.ContentBlockStartMemberToolUse{Value: types.ToolUseBlockStart{ToolUseId: aws.String("tooluse_x"), Name: aws.String("weather")}}}},
			[]string{chunkJSON(`{"tool_calls":[{"index":0,"id":"tooluse_x","type":"function","function":{"name":"weather","arguments":""}}]}`, "null")}},
		{&types.ConverseStreamOutputMemberContentBlockDelta{Value: types.ContentBlockDeltaEvent{ContentBlockIndex: aws.Int32(1),
			Delta: &types.ContentBlockDeltaMemberToolUse{Value: types.ToolUseBlockDelta{Input: aws.String(`{"city":`)}}}},
			[]string{chunkJSON(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}`, "null")}},
		{&types.ConverseStreamOutputMemberContentBlockStart{Value: types.ContentBlockStartEvent{ContentBlockIndex: aws.Int32(2),
			Start: &types.ContentBlockStartMemberToolUse{Value: types.ToolUseBlockStart{ToolUseId: aws.String("tooluse_y"), Name: aws.String("time")}}}},
			[]string{chunkJSON(`{"tool_calls":[{"index":1,"id":"tooluse_y","type":"function","function":{"name":"time","arguments":""}}]}`, "null")}},
		{&types.ConverseStreamOutputMemberContentBlockDelta{Value: types.ContentBlockDeltaEvent{ContentBlockIndex: aws.Int32(1),
			Delta: &types.ContentBlockDeltaMemberToolUse{Value: types.ToolUseBlockDelta{Input: aws.String(`"Paris"}`)}}}},
			[]string{chunkJSON(`{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}`, "null")}},
		{&types.ConverseStreamOutputMemberMessageStop{Value: types.MessageStopEvent{StopReason: types.StopReasonToolUse}}, nil},
		{&types.ConverseStreamOutputMemberMetadata{Value: types.ConverseStreamMetadataEvent{Usage: usage}},
			[]string{`{` + chunkHead + `,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],` +
				`"usage":{"prompt_tokens":16,"completion_tokens":5,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":4}}}`}},
	}
	s := NewStream(meta, false)
	for i, st := range steps {
		got := events(t, s.Event(nil, st.ev))
		if len(got) != len(st.want) {
			t.Fatalf("step %d: %d events, want %d: %q", i, len(got), len(st.want), got)
		}
		for j := range got {
			jsontest.Equal(t, []byte(got[j]), st.want[j])
		}
	}
	tail, err := s.End(nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(tail) != "data: [DONE]\n\n" {
		t.Errorf("end %q, want only [DONE]", tail)
	}
	if u := s.Usage(); u == nil || u.TotalTokens != 21 {
		t.Errorf("usage %+v", u)
	}
}

func TestStreamUsageChunkWhenAskedFor(t *testing.T) {
	t.Parallel()
	s := NewStream(meta, true)
	var b []byte
	// No messageStart: the first content brings the role.
	b = s.Event(b, &types.ConverseStreamOutputMemberContentBlockDelta{Value: types.ContentBlockDeltaEvent{
		ContentBlockIndex: aws.Int32(0), Delta: &types.ContentBlockDeltaMemberText{Value: "Hi"}}})
	b = s.Event(b, &types.ConverseStreamOutputMemberMessageStop{Value: types.MessageStopEvent{StopReason: types.StopReasonMaxTokens}})
	b = s.Event(b, &types.ConverseStreamOutputMemberMetadata{Value: types.ConverseStreamMetadataEvent{
		Usage: &types.TokenUsage{InputTokens: aws.Int32(2), OutputTokens: aws.Int32(1), TotalTokens: aws.Int32(3)}}})
	b, err := s.End(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		chunkJSON(`{"role":"assistant","content":""}`, "null"),
		chunkJSON(`{"content":"Hi"}`, "null"),
		chunkJSON(`{}`, `"length"`),
		`{` + chunkHead + `,"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":1,"total_tokens":3,"prompt_tokens_details":{"cached_tokens":0}}}`,
		"[DONE]",
	}
	got := events(t, b)
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d: %q", len(got), len(want), got)
	}
	for i := range want {
		if want[i] == "[DONE]" {
			if got[i] != want[i] {
				t.Errorf("event %d %q, want [DONE]", i, got[i])
			}
			continue
		}
		jsontest.Equal(t, []byte(got[i]), want[i])
	}
}

func TestStreamWithoutMetadataFinishesAtItsEnd(t *testing.T) {
	t.Parallel()
	s := NewStream(meta, true)
	b := s.Event(nil, &types.ConverseStreamOutputMemberMessageStop{Value: types.MessageStopEvent{StopReason: types.StopReasonEndTurn}})
	if len(b) != 0 {
		t.Errorf("messageStop sent %q before metadata", b)
	}
	b, err := s.End(b)
	if err != nil {
		t.Fatal(err)
	}
	got := events(t, b)
	if len(got) != 3 || got[2] != "[DONE]" {
		t.Fatalf("events %q", got)
	}
	jsontest.Equal(t, []byte(got[1]), chunkJSON(`{}`, `"stop"`))
}

func TestStreamEndedBeforeMessageStop(t *testing.T) {
	t.Parallel()
	s := NewStream(meta, false)
	s.Event(nil, &types.ConverseStreamOutputMemberContentBlockDelta{Value: types.ContentBlockDeltaEvent{
		ContentBlockIndex: aws.Int32(0), Delta: &types.ContentBlockDeltaMemberText{Value: "Hi"}}})
	if b, err := s.End(nil); !errors.Is(err, ErrUnfinished) || len(b) != 0 {
		t.Errorf("End = %q, %v; want nothing and ErrUnfinished", b, err)
	}
}
