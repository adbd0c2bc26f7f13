package httpapi

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/gateway"
)

// TestGatewayErrorsMapToTheirCodes: every category the gateway answers
// with maps to the API code of its name, keeping message, param and
// Retry-After, however deeply it is wrapped; anything else is an
// internal_error that shows nothing of its text.
func TestGatewayErrorsMapToTheirCodes(t *testing.T) {
	t.Parallel()
	for _, category := range []error{
		gateway.ErrInvalid, gateway.ErrNotFound, gateway.ErrRateLimited, gateway.ErrQueueFull, gateway.ErrQueueTimeout,
		gateway.ErrNoCandidate, gateway.ErrUpstream, gateway.ErrUpstreamTimeout, gateway.ErrInternal, gateway.ErrUnavailable,
	} {
		ge := &gateway.Error{Category: category, Message: "m", Param: "p", RetryAfter: time.Second}
		got := answerOf(fmt.Errorf("wrapped: %w", ge))
		if string(got.Code) != category.Error() || got.Message != "m" || got.Param != "p" || got.RetryAfter != time.Second {
			t.Errorf("%v answered as %+v", category, got)
		}
		if !got.Code.Known() {
			t.Errorf("%v: code %s has no status", category, got.Code)
		}
	}
	if got := answerOf(errors.New("secret detail")); got.Code != weir.CodeInternal || got.Message != "internal error" {
		t.Errorf("a foreign error answered as %+v", got)
	}
}

// errorBody is OpenAI's error shape, as a client decodes it.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Code    string  `json:"code"`
	Param   *string `json:"param"`
}
