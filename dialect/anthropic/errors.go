package anthropic

import (
	"encoding/json"
	"net/http"
)

// Anthropic's error types.
const (
	ErrInvalidRequest  = "invalid_request_error"
	ErrAuthentication  = "authentication_error"
	ErrBilling         = "billing_error"
	ErrPermission      = "permission_error"
	ErrNotFound        = "not_found_error"
	ErrRequestTooLarge = "request_too_large"
	ErrRateLimit       = "rate_limit_error"
	ErrAPI             = "api_error"
	ErrTimeout         = "timeout_error"
	ErrOverloaded      = "overloaded_error"
)

// StatusOverloaded is the status Anthropic answers overloaded_error with:
// the API is overloaded for a while, across its users.
const StatusOverloaded = 529

// ErrorType is Anthropic's error type for an answer of status: its own
// table, invalid_request_error for another 4xx and api_error for another
// 5xx.
func ErrorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return ErrAuthentication
	case http.StatusPaymentRequired:
		return ErrBilling
	case http.StatusForbidden:
		return ErrPermission
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusRequestEntityTooLarge:
		return ErrRequestTooLarge
	case http.StatusTooManyRequests:
		return ErrRateLimit
	case http.StatusGatewayTimeout:
		return ErrTimeout
	case StatusOverloaded:
		return ErrOverloaded
	}
	if status >= 500 {
		return ErrAPI
	}
	return ErrInvalidRequest
}

// ErrorStatus is the status of an error of type typ, as Anthropic answers
// it (an error event inside a stream has a type and no status).
func ErrorStatus(typ string) int {
	switch typ {
	case ErrInvalidRequest:
		return http.StatusBadRequest
	case ErrAuthentication:
		return http.StatusUnauthorized
	case ErrBilling:
		return http.StatusPaymentRequired
	case ErrPermission:
		return http.StatusForbidden
	case ErrNotFound:
		return http.StatusNotFound
	case ErrRequestTooLarge:
		return http.StatusRequestEntityTooLarge
	case ErrRateLimit:
		return http.StatusTooManyRequests
	case ErrTimeout:
		return http.StatusGatewayTimeout
	case ErrOverloaded:
		return StatusOverloaded
	}
	return http.StatusInternalServerError
}

// ParseError reads an error answer in Anthropic's shape; ok is false for
// a body of another shape.
func ParseError(body []byte) (ErrorDetail, bool) {
	var e struct {
		Type  string       `json:"type"`
		Error *ErrorDetail `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == nil || e.Error.Type == "" {
		return ErrorDetail{}, false
	}
	return *e.Error, true
}

// ErrorJSON is an error answer in Anthropic's shape.
func ErrorJSON(d ErrorDetail, requestID string) []byte {
	b, _ := json.Marshal(ErrorBody{Type: "error", Error: d, RequestID: requestID}) // strings: cannot fail
	return append(b, '\n')
}

// RequestError is a request that cannot be translated: Param names what
// is wrong with it (in the dialect of the request), Message says why.
// Unsupported: the request is a valid one that the translation cannot
// carry, which a platform speaking the Messages API itself can serve.
type RequestError struct {
	Param       string
	Message     string
	Unsupported bool
}

func (e *RequestError) Error() string {
	if e.Param == "" {
		return e.Message
	}
	return e.Param + ": " + e.Message
}

func refuse(param, msg string) *RequestError { return &RequestError{Param: param, Message: msg} }

// unsupported is a refusal of what the translation cannot carry.
func unsupported(param, msg string) *RequestError {
	return &RequestError{Param: param, Message: msg, Unsupported: true}
}
