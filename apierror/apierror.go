// Package apierror writes Weir's error answers in OpenAI's shape,
// {"error": {"message", "type", "code", "param"}}: the one writer for the
// API (httpapi), the console and the edge relay, with the status and type
// of each code from weir.Code's one table.
package apierror

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/weir-gateway/weir"
)

// HeaderShouldRetry tells a client's SDK whether to retry an error answer
// on its own (OpenAI's and Anthropic's SDKs read it).
const HeaderShouldRetry = "X-Should-Retry"

// Answer is an error answer: a code, a message, the offending parameter
// and, for 429s, when to come back.
type Answer struct {
	Code    weir.Code
	Message string
	Param   string
	// RetryAfter, if positive, is sent as Retry-After in whole seconds,
	// rounded up.
	RetryAfter time.Duration
	// Client: the code's answer as the client's fault (400
	// invalid_request_error), where the code is otherwise the server's.
	Client bool
	// NoRetry sends x-should-retry: false, which OpenAI's SDKs obey
	// before the status and Retry-After: the request said how long it
	// waits, and a silent retry would wait past it.
	NoRetry bool
	// Status, if set, is written in place of Code's: for a protocol of
	// Weir's own between its replicas (the edge relay), whose codes are
	// not the API's.
	Status int
}

func (a *Answer) Error() string { return string(a.Code) + ": " + a.Message }

type body struct {
	Error detail `json:"error"`
}

type detail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Code    string  `json:"code"`
	Param   *string `json:"param"`
}

// StatusOf is the status Write writes for a.
func (a *Answer) StatusOf() int {
	switch {
	case a.Status != 0:
		return a.Status
	case a.Client:
		return weir.CodeInvalidRequest.Status()
	}
	return a.Code.Status()
}

// JSON is a's body in OpenAI's error shape: what Write writes, and what a
// stream already under way sends as its last event.
func (a *Answer) JSON() []byte {
	typ := a.Code.Type()
	switch {
	case a.Client || a.Status != 0 && a.Status < 500:
		typ = weir.CodeInvalidRequest.Type()
	case a.Status >= 500:
		typ = weir.CodeInternal.Type()
	}
	b := body{Error: detail{Message: a.Message, Type: typ, Code: string(a.Code)}}
	if a.Param != "" {
		b.Error.Param = &a.Param
	}
	out, _ := json.Marshal(b) // strings and a pointer to one: cannot fail
	return append(out, '\n')
}

// Write writes a in OpenAI's error shape and returns the status written.
func Write(w http.ResponseWriter, a *Answer) int {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if a.RetryAfter > 0 {
		secs := int64((a.RetryAfter + time.Second - 1) / time.Second)
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	if a.NoRetry {
		h.Set(HeaderShouldRetry, "false")
	}
	status := a.StatusOf()
	w.WriteHeader(status)
	_, _ = w.Write(a.JSON())
	return status
}
