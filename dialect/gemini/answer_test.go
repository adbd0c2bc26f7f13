package gemini

import (
	"errors"
	"testing"
	"time"

	"github.com/weir-gateway/weir/internal/jsontest"
)

func TestToChatTranslatesAnAnswer(t *testing.T) {
	t.Parallel()
	answer := `{
		"candidates": [{
			"content": {"role": "model", "parts": [
				{"text": "thinking...", "thought": true},
				{"text": "The answer "},
				{"text": "is 4."},
				{"functionCall": {"name": "add", "args": {"a": 2, "b": 2}}, "thoughtSignature": "c2ln"},
				{"functionCall": {"id": "fc-9", "name": "log"}}
			]},
			"finishReason": "STOP",
			"index": 0,
			"safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"}]
		}],
		"usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "thoughtsTokenCount": 3, "totalTokenCount": 18, "cachedContentTokenCount": 4},
		"modelVersion": "gemini-2.5-flash-001",
		"responseId": "r1"
	}`
	got, err := ToChat([]byte(answer), AnswerMeta{Model: "gemini-2.5-flash", Created: 1700000000})
	if err != nil {
		t.Fatal(err)
	}
	want := `{
		"id": "chatcmpl-r1", "object": "chat.completion", "created": 1700000000, "model": "gemini-2.5-flash-001",
		"system_fingerprint": null,
		"choices": [{"index": 0, "logprobs": null, "finish_reason": "tool_calls", "message": {
			"role": "assistant", "content": "The answer is 4.", "refusal": null,
			"tool_calls": [
				{"id": "call_r1_1", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 2, \"b\": 2}"},
				 "extra_content": {"google": {"thought_signature": "c2ln"}}},
				{"id": "fc-9", "type": "function", "function": {"name": "log", "arguments": "{}"}}
			]}}],
		"usage": {"prompt_tokens": 10, "completion_tokens": 8, "total_tokens": 18,
			"prompt_tokens_details": {"cached_tokens": 4}, "completion_tokens_details": {"reasoning_tokens": 3}}
	}`
	if jsontest.Canonical(t, got) != jsontest.Canonical(t, []byte(want)) {
		t.Fatalf("got  %s\nwant %s", jsontest.Canonical(t, got), jsontest.Canonical(t, []byte(want)))
	}
}

func TestToChatTextOnlyAndSeveralCandidates(t *testing.T) {
	t.Parallel()
	answer := `{"candidates": [
		{"content": {"role": "model", "parts": [{"text": "one"}]}, "finishReason": "MAX_TOKENS"},
		{"content": {"role": "model", "parts": [{"text": "two"}]}, "finishReason": "SAFETY", "index": 1}
	], "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2, "totalTokenCount": 5}, "responseId": "r2"}`
	got, err := ToChat([]byte(answer), AnswerMeta{Model: "m", Created: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id": "chatcmpl-r2", "object": "chat.completion", "created": 1, "model": "m", "system_fingerprint": null,
		"choices": [
			{"index": 0, "logprobs": null, "finish_reason": "length", "message": {"role": "assistant", "content": "one", "refusal": null}},
			{"index": 1, "logprobs": null, "finish_reason": "content_filter", "message": {"role": "assistant", "content": "two", "refusal": null}}
		],
		"usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5,
			"prompt_tokens_details": {"cached_tokens": 0}, "completion_tokens_details": {"reasoning_tokens": 0}}}`
	if jsontest.Canonical(t, got) != jsontest.Canonical(t, []byte(want)) {
		t.Fatalf("got  %s\nwant %s", jsontest.Canonical(t, got), jsontest.Canonical(t, []byte(want)))
	}
}

func TestToChatBlockedPrompt(t *testing.T) {
	t.Parallel()
	_, err := ToChat([]byte(`{"promptFeedback": {"blockReason": "SAFETY", "safetyRatings": []}, "usageMetadata": {"promptTokenCount": 8}}`), AnswerMeta{})
	var be *BlockedError
	if !errors.As(err, &be) || be.Reason != "SAFETY" {
		t.Fatalf("err %v; want a *BlockedError for SAFETY", err)
	}
	want := `{"error":{"message":"Gemini's safety filter blocked the prompt (SAFETY); change the prompt and try again.","type":"invalid_request_error","param":"messages","code":"content_filter"}}`
	if got := BlockedToChat(be); jsontest.Canonical(t, got) != jsontest.Canonical(t, []byte(want)) {
		t.Fatalf("got %s", got)
	}
}

func TestFinishReasons(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		reason string
		calls  bool
		want   string
	}{
		{FinishStop, false, "stop"},
		{FinishStop, true, "tool_calls"},
		{"", false, "stop"},
		{FinishMaxTokens, false, "length"},
		{FinishMaxTokens, true, "length"},
		{FinishSafety, false, "content_filter"},
		{FinishRecitation, false, "content_filter"},
		{FinishBlocklist, false, "content_filter"},
		{FinishProhibitedContent, false, "content_filter"},
		{FinishSPII, false, "content_filter"},
		{FinishImageSafety, false, "content_filter"},
		{FinishLanguage, false, "stop"},
		{FinishOther, false, "stop"},
		{FinishMalformedFunctionCall, false, "stop"},
		{FinishUnexpectedToolCall, false, "stop"},
		{FinishTooManyToolCalls, true, "tool_calls"},
	} {
		if got := FinishReason(tc.reason, tc.calls); got != tc.want {
			t.Errorf("FinishReason(%q, %v) = %q; want %q", tc.reason, tc.calls, got, tc.want)
		}
	}
}

func TestErrorToChat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"invalid argument", 400, `{"error":{"code":400,"message":"Invalid JSON payload received.","status":"INVALID_ARGUMENT"}}`,
			`{"error":{"message":"Gemini: Invalid JSON payload received.","type":"invalid_request_error","param":null,"code":"invalid_argument"}}`},
		{"not found", 404, `{"error":{"code":404,"message":"models/nope is not found","status":"NOT_FOUND"}}`,
			`{"error":{"message":"Gemini: models/nope is not found","type":"invalid_request_error","param":null,"code":"not_found"}}`},
		{"server", 500, `{"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}`,
			`{"error":{"message":"Gemini: An internal error has occurred.","type":"server_error","param":null,"code":"internal"}}`},
		{"not Gemini's", 502, `<html>bad gateway</html>`,
			`{"error":{"message":"Gemini: <html>bad gateway</html>","type":"server_error","param":null,"code":null}}`},
		{"empty", 413, ``,
			`{"error":{"message":"Gemini: Request Entity Too Large","type":"invalid_request_error","param":null,"code":null}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ErrorToChat(tc.status, []byte(tc.body)); jsontest.Canonical(t, got) != jsontest.Canonical(t, []byte(tc.want)) {
				t.Fatalf("got %s", got)
			}
		})
	}
}

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body string
		want time.Duration
	}{
		{`{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED","details":[
			{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"x"}]},
			{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}`, 37 * time.Second},
		{`{"error":{"code":429,"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1.5s"}]}}`, 1500 * time.Millisecond},
		{`{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}}`, 0},
		{`{"error":{"code":429,"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"soon"}]}}`, 0},
		{`not json`, 0},
	} {
		if got := RetryDelay([]byte(tc.body)); got != tc.want {
			t.Errorf("RetryDelay(%s) = %v; want %v", tc.body, got, tc.want)
		}
	}
}
