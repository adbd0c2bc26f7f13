package gateway

import (
	"math"
	"testing"
)

func TestUsageOf(t *testing.T) {
	for _, tc := range []struct {
		body string
		want int64
		ok   bool
	}{
		{`{"id":"x","usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`, 7, true},
		{`{"usage":{"prompt_tokens":3,"completion_tokens":4},"choices":[{"message":{"content":"\"usage\": 9"}}]}`, 7, true},
		{`{"choices":[{"tool":{"usage":"nested"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`, 2, true},
		{`{"id":"x"}`, 0, false},
		// The Responses API's: a response object, and a stream's events.
		{`{"id":"resp_1","object":"response","usage":{"input_tokens":5,"input_tokens_details":{"cached_tokens":0},"output_tokens":6,"total_tokens":11},"user":null}`, 11, true},
		{`{"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","usage":{"input_tokens":5,"output_tokens":6,"total_tokens":11},"metadata":{}}}`, 11, true},
		{`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","usage":null,"metadata":{}}}`, 0, false},
	} {
		u, ok := usageOf([]byte(tc.body))
		if ok != tc.ok || u.total() != tc.want {
			t.Errorf("usageOf(%s) = %+v %v, want total %d %v", tc.body, u, ok, tc.want, tc.ok)
		}
	}
}

// TestUsageTotalSaturates: an upstream's token counts near the int64
// maximum give the largest total, never one that wrapped negative, and
// negative ones count as none.
func TestUsageTotalSaturates(t *testing.T) {
	t.Parallel()
	if got := (usage{PromptTokens: math.MaxInt64, CompletionTokens: 5}).total(); got != math.MaxInt64 {
		t.Errorf("usage total of a huge prompt = %d", got)
	}
	if got := (usage{PromptTokens: -5, CompletionTokens: 3}).total(); got != 3 {
		t.Errorf("usage total with a negative prompt = %d, want 3", got)
	}
}

// TestUsageOfResponses: the Responses API's input and output tokens are
// the prompt and completion tokens of the usage record.
func TestUsageOfResponses(t *testing.T) {
	t.Parallel()
	u, ok := usageOf([]byte(`{"usage":{"input_tokens":5,"output_tokens":6,"total_tokens":11}}`))
	if !ok || u.PromptTokens != 5 || u.CompletionTokens != 6 {
		t.Errorf("usageOf = %+v %v", u, ok)
	}
}

// TestUsageOfMessages: Anthropic's Messages API counts the input read
// from and written to its prompt cache apart: all of it is the prompt.
func TestUsageOfMessages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body               string
		prompt, completion int64
	}{
		{`{"id":"msg_1","type":"message","content":[],"usage":{"input_tokens":5,"cache_creation_input_tokens":7,"cache_read_input_tokens":11,"output_tokens":6}}`, 23, 6},
		{`{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":5,"output_tokens":1}}}`, 5, 1},
		{`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}`, 0, 9},
	} {
		u, ok := usageOf([]byte(tc.body))
		if !ok || u.PromptTokens != tc.prompt || u.CompletionTokens != tc.completion {
			t.Errorf("usageOf(%s) = %+v %v, want %d and %d", tc.body, u, ok, tc.prompt, tc.completion)
		}
	}
}
