package openaiwire

import "encoding/json"

// ErrorBody is OpenAI's error answer: {"error": {"message", "type",
// "param", "code"}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is an error's detail. Param and Code are null when not
// given, and strings as OpenAI writes them; they are read as any JSON,
// since some upstreams answer a number.
type ErrorDetail struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   any    `json:"param"`
	Code    any    `json:"code"`
}

// Error types OpenAI answers.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeServer         = "server_error"
)

// ErrorType is the type OpenAI gives an error of the status:
// invalid_request_error for a 4xx, server_error else.
func ErrorType(status int) string {
	if status >= 500 {
		return TypeServer
	}
	return TypeInvalidRequest
}

// ErrorJSON is an error body of the type given; an empty param or code
// is null.
func ErrorJSON(typ, message, param, code string) []byte {
	e := ErrorBody{Error: ErrorDetail{Message: message, Type: typ}}
	if param != "" {
		e.Error.Param = param
	}
	if code != "" {
		e.Error.Code = code
	}
	b, _ := json.Marshal(e) // strings: cannot fail
	return b
}
