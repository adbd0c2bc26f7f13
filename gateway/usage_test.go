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

// TestUsageCachedTokens: the cached part of the prompt is read from each
// dialect's usage: Chat Completions' prompt_tokens_details, the
// Responses API's input_tokens_details, Anthropic's
// cache_read_input_tokens (also from a stream's message_delta).
func TestUsageCachedTokens(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body           string
		prompt, cached int64
	}{
		{`{"usage":{"prompt_tokens":100,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":64}}}`, 100, 64},
		{`{"usage":{"input_tokens":90,"input_tokens_details":{"cached_tokens":32},"output_tokens":6}}`, 90, 32},
		{`{"usage":{"input_tokens":10,"cache_creation_input_tokens":20,"cache_read_input_tokens":70,"output_tokens":6}}`, 100, 70},
		{`{"usage":{"prompt_tokens":5,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":-3}}}`, 5, 0},
		{`{"usage":{"prompt_tokens":5,"completion_tokens":4}}`, 5, 0},
	} {
		u, ok := usageOf([]byte(tc.body))
		if !ok || u.PromptTokens != tc.prompt || u.CachedTokens != tc.cached {
			t.Errorf("usageOf(%s) = %+v %v; want prompt %d, cached %d", tc.body, u, ok, tc.prompt, tc.cached)
		}
	}
	start, _ := usageOf([]byte(`{"type":"message_start","message":{"usage":{"input_tokens":10,"cache_read_input_tokens":40,"output_tokens":1}}}`))
	delta, _ := usageOf([]byte(`{"type":"message_delta","usage":{"output_tokens":9}}`))
	if u := start.update(delta); u.CachedTokens != 40 || u.PromptTokens != 50 || u.CompletionTokens != 9 {
		t.Errorf("a Messages stream's usage: %+v; want 50 prompt, 40 cached, 9 completion", u)
	}
}

// TestImagesOf: an images answer's images are its data's entries.
func TestImagesOf(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]int64{
		`{"created":1,"data":[{"b64_json":"x"},{"url":"u"}]}`: 2,
		`{"created":1,"data":[]}`:                             0,
		`{"error":{"message":"no"}}`:                          0,
		`not json`:                                            0,
	} {
		if got := imagesOf([]byte(body)); got != want {
			t.Errorf("imagesOf(%s) = %d, want %d", body, got, want)
		}
	}
}
