package gemini

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/weir-gateway/weir/openaiwire"
)

// ErrorToChat rewrites Gemini's error body in OpenAI's shape: its message
// with "Gemini: " before it, its status ("INVALID_ARGUMENT") as the code,
// lower-cased. A body that is not Gemini's is quoted as the message.
func ErrorToChat(status int, body []byte) []byte {
	var g ErrorBody
	msg, code := strings.TrimSpace(string(body)), ""
	if json.Unmarshal(body, &g) == nil && g.Error.Message != "" {
		msg, code = g.Error.Message, strings.ToLower(g.Error.Status)
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return openaiwire.ErrorJSON(openaiwire.ErrorType(status), "Gemini: "+msg, "", code)
}

// RetryDelay is how long Gemini's error body asks to wait (its RetryInfo
// detail), or 0.
func RetryDelay(body []byte) time.Duration {
	var g ErrorBody
	if json.Unmarshal(body, &g) != nil {
		return 0
	}
	for _, d := range g.Error.Details {
		if d.Type != RetryInfoType || d.RetryDelay == "" {
			continue
		}
		if v, err := time.ParseDuration(d.RetryDelay); err == nil && v > 0 {
			return v
		}
	}
	return 0
}

// BlockedToChat is the error a blocked prompt is answered with: 400,
// code "content_filter", as OpenAI-shaped platforms refuse a prompt their
// filter stops.
func BlockedToChat(e *BlockedError) []byte {
	return openaiwire.ErrorJSON(openaiwire.TypeInvalidRequest, "Gemini's safety filter blocked the prompt ("+e.Reason+"); change the prompt and try again.", "messages", "content_filter")
}
