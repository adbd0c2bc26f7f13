package provider

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/weir-gateway/weir/dialect/anthropic"
)

// An upstream that fails once its answer has begun says so inside the
// stream: Anthropic with an error event, the Responses API with an error
// event or response.failed. The HTTP status was 200 and is gone; the
// event's type or code is all there is to go by, and it says nothing of
// when to come back.

// StreamFailure is the upstream's failure that one event of a stream
// passed through as it came reports (event, its name; data, its data),
// or nil: Anthropic's error event ({"type": "error", "error": {"type",
// "message"}}), a Responses stream's error event ({"type": "error",
// "code", "message"}, or its error nested) or its response.failed (the
// response's error). Only the upstream's own failures count: an overload
// or a rate limit, which pauses the platform model for OverloadPause
// (Pauses), and a server error; one the request caused, or a type or
// code it does not know, is nil. The *Error's Body is data, copied.
func StreamFailure(event string, data []byte) *Error {
	if event != "error" && event != "response.failed" {
		return nil
	}
	var ev struct {
		Error *struct {
			Type    string `json:"type"`
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Code     string `json:"code"`
		Message  string `json:"message"`
		Response *struct {
			Error *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		} `json:"response"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		var te *json.UnmarshalTypeError // a code that is a number, say: the rest is read
		if !errors.As(err, &te) {
			return nil
		}
	}
	var names []string
	msg := ev.Message
	switch {
	case ev.Response != nil && ev.Response.Error != nil:
		names, msg = []string{ev.Response.Error.Code}, ev.Response.Error.Message
	case ev.Error != nil:
		names, msg = []string{ev.Error.Code, ev.Error.Type}, ev.Error.Message // the code is the finer
	default:
		names = []string{ev.Code}
	}
	for _, name := range names {
		if e := streamError(name, msg); e != nil {
			e.Body = append([]byte(nil), data...)
			return e
		}
	}
	return nil
}

// streamError is the *Error of a failure reported mid-stream as name (an
// error type or code), or nil if name is not the upstream's own failure.
func streamError(name, msg string) *Error {
	status, ok := streamStatuses[name]
	if !ok {
		return nil
	}
	e := &Error{Status: status, Err: errors.New(name + ": " + msg)}
	switch {
	case status == anthropic.StatusOverloaded || status == http.StatusServiceUnavailable:
		e.Overloaded, e.RetryAfter = true, OverloadPause
	case status == http.StatusTooManyRequests:
		e.RetryAfter = OverloadPause
	}
	return e
}

// streamStatuses are the error types and codes that report an upstream's
// own failure mid-stream, and the status each stands for: Anthropic's
// types, and the codes of OpenAI's and its kin's Responses streams.
var streamStatuses = map[string]int{
	anthropic.ErrOverloaded: anthropic.StatusOverloaded,
	anthropic.ErrRateLimit:  http.StatusTooManyRequests,
	anthropic.ErrAPI:        http.StatusInternalServerError,
	anthropic.ErrTimeout:    http.StatusGatewayTimeout,
	"rate_limit_exceeded":   http.StatusTooManyRequests,
	"too_many_requests":     http.StatusTooManyRequests,
	"server_is_overloaded":  http.StatusServiceUnavailable,
	"server_overloaded":     http.StatusServiceUnavailable,
	"overloaded":            http.StatusServiceUnavailable,
	"server_error":          http.StatusInternalServerError,
}
