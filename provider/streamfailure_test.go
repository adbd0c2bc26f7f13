package provider_test

import (
	"net/http"
	"testing"

	"github.com/weir-gateway/weir/provider"
)

// TestStreamFailure: the error events of Anthropic's and of the
// Responses API's streams that report the upstream's overload or rate
// limit pause (for OverloadPause); a server error is a failure that
// does not; one the request caused, another event, and what does not
// parse are none.
func TestStreamFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, event, data string
		status            int // 0: none
		pauses            bool
	}{
		{"anthropic overloaded", "error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, 529, true},
		{"anthropic rate limit", "error", `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, 429, true},
		{"anthropic api error", "error", `{"type":"error","error":{"type":"api_error","message":"oops"}}`, 500, false},
		{"anthropic invalid request", "error", `{"type":"error","error":{"type":"invalid_request_error","message":"no"}}`, 0, false},
		{"responses error event", "error", `{"type":"error","code":"rate_limit_exceeded","message":"Rate limit reached","param":null,"sequence_number":5}`, 429, true},
		{"responses error event, nested", "error", `{"type":"error","error":{"type":"server_error","code":"server_is_overloaded","message":"busy"}}`, 503, true},
		{"responses failed, rate limit", "response.failed", `{"type":"response.failed","response":{"status":"failed","error":{"code":"rate_limit_exceeded","message":"Rate limit"}}}`, 429, true},
		{"responses failed, server error", "response.failed", `{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"x"}}}`, 500, false},
		{"responses failed, the prompt's", "response.failed", `{"type":"response.failed","response":{"status":"failed","error":{"code":"invalid_prompt","message":"x"}}}`, 0, false},
		{"a number for a code", "error", `{"type":"error","code":429,"error":{"type":"overloaded_error","message":"x"}}`, 529, true},
		{"another event", "response.output_text.delta", `{"type":"error","code":"rate_limit_exceeded"}`, 0, false},
		{"not JSON", "error", `overloaded_error`, 0, false},
	} {
		pe := provider.StreamFailure(tc.event, []byte(tc.data))
		switch {
		case tc.status == 0 && pe != nil:
			t.Errorf("%s: %v; want none", tc.name, pe)
		case tc.status == 0:
		case pe == nil:
			t.Errorf("%s: none; want %d", tc.name, tc.status)
		case pe.Status != tc.status || pe.Pauses() != tc.pauses || !pe.Retryable() || string(pe.Body) != tc.data:
			t.Errorf("%s: %#v (pauses %v); want status %d, pauses %v, the data as its body", tc.name, pe, pe.Pauses(), tc.status, tc.pauses)
		case tc.pauses && pe.RetryAfter != provider.OverloadPause:
			t.Errorf("%s: pauses for %s; want OverloadPause", tc.name, pe.RetryAfter)
		case tc.status == http.StatusServiceUnavailable && !pe.Overloaded:
			t.Errorf("%s: not Overloaded", tc.name)
		}
	}
}
