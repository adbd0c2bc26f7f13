package mock

import (
	"net/http"
	"strconv"
	"time"

	"github.com/weir-gateway/weir/openaiwire"
)

// apiError is OpenAI's error object. Empty Param and Code are sent as null,
// as OpenAI does.
type apiError struct {
	Status  int
	Message string
	Type    string
	Param   string
	Code    string
}

func (e apiError) body() []byte {
	return append(openaiwire.ErrorJSON(e.Type, e.Message, e.Param, e.Code), '\n')
}

func invalidRequest(param, format string) apiError {
	return apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: format}
}

// statusError is the error a status forced by X-Mock-Status (or drawn by
// ErrorRate) is answered with: what OpenAI answers with that status.
func statusError(status int) apiError {
	switch status {
	case http.StatusBadRequest:
		return apiError{Status: status, Type: "invalid_request_error", Message: "Bad request (forced by the mock provider)."}
	case http.StatusUnauthorized:
		return apiError{Status: status, Type: "invalid_request_error", Code: "invalid_api_key", Message: "Incorrect API key provided (forced by the mock provider)."}
	case http.StatusForbidden:
		return apiError{Status: status, Type: "invalid_request_error", Code: "unsupported_country_region_territory", Message: "Access denied (forced by the mock provider)."}
	case http.StatusNotFound:
		return apiError{Status: status, Type: "invalid_request_error", Code: "model_not_found", Message: "The model does not exist or you do not have access to it (forced by the mock provider)."}
	case http.StatusTooManyRequests:
		return apiError{Status: status, Type: "requests", Code: "rate_limit_exceeded", Message: "Rate limit reached for requests (forced by the mock provider). Please try again later."}
	case http.StatusInternalServerError:
		return apiError{Status: status, Type: "server_error", Message: "The server had an error while processing your request. Sorry about that!"}
	case http.StatusServiceUnavailable:
		return apiError{Status: status, Type: "server_error", Message: "The engine is currently overloaded, please try again later."}
	case statusOverloaded:
		return apiError{Status: status, Type: "server_error", Message: "Overloaded (forced by the mock provider)."}
	}
	return apiError{Status: status, Type: openaiwire.ErrorType(status), Message: http.StatusText(status) + " (forced by the mock provider)."}
}

// capError is the answer past MaxConcurrent.
func capError(limit int) apiError {
	return apiError{
		Status:  http.StatusTooManyRequests,
		Type:    "requests",
		Code:    "rate_limit_exceeded",
		Message: "Rate limit reached: the mock provider is serving its limit of " + strconv.Itoa(limit) + " concurrent requests. Please try again later.",
	}
}

// writeError writes e; 429 and 503 carry Retry-After (whole seconds, at
// least 1) and retry-after-ms, which the OpenAI SDKs read first.
func writeError(w http.ResponseWriter, e apiError, retryAfter time.Duration) {
	writeErrorBody(w, e.Status, e.body(), retryAfter)
}

func writeErrorBody(w http.ResponseWriter, status int, body []byte, retryAfter time.Duration) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		secs := int64((retryAfter + time.Second - 1) / time.Second)
		if secs < 1 {
			secs = 1
		}
		h["Retry-After"] = []string{strconv.FormatInt(secs, 10)}
		h["Retry-After-Ms"] = []string{strconv.FormatInt(retryAfter.Milliseconds(), 10)}
	}
	w.WriteHeader(status)
	w.Write(body)
}

// Header values shared by every response, so the hot path allocates none.
var (
	jsonContentType = []string{"application/json"}
	sseContentType  = []string{"text/event-stream; charset=utf-8"}
	noCache         = []string{"no-cache"}
)
