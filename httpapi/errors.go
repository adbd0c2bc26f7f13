package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/apierror"
	"github.com/weir-gateway/weir/gateway"
)

// apiError is an error answer of the API (apierror.Answer).
type apiError = apierror.Answer

func errorf(code weir.Code, param, msg string) *apiError {
	return &apiError{Code: code, Message: msg, Param: param}
}

// writeError writes e in OpenAI's error shape.
func writeError(w http.ResponseWriter, e *apiError) { apierror.Write(w, e) }

// answerOf is the answer to err: an *apiError as it is, a gateway
// *Error under its category's code, anything else internal_error (with
// nothing of err's text shown).
func answerOf(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var ge *gateway.Error
	if code, client, ok := gateway.CodeOf(err); ok && errors.As(err, &ge) {
		return &apiError{Code: code, Message: ge.Message, Param: ge.Param, RetryAfter: ge.RetryAfter, Client: client, NoRetry: ge.NoRetry}
	}
	return errorf(weir.CodeInternal, "", "internal error")
}

// writeErr answers err — the one way a handler's error becomes an answer
// — and returns the status written. An error that is neither the API's
// nor the gateway's is logged (the client sees only internal_error). An
// upstream's own refusal of the request is passed on as it came.
func (s *Server) writeErr(w http.ResponseWriter, r *http.Request, err error) int {
	var re *gateway.RefusedError
	if errors.As(err, &re) {
		return passUpstreamError(w, re)
	}
	e := answerOf(err)
	ri := infoOf(w)
	ri.access.code = e.Code
	if e.Code == weir.CodeInternal {
		var ge *gateway.Error
		if !errors.As(err, &ge) {
			ri.log().Error("request failed", "error", err)
		}
	}
	return apierror.Write(w, e)
}

// causeOf is the cause a gateway error wraps, or err itself.
func causeOf(err error) error {
	var ge *gateway.Error
	if errors.As(err, &ge) && ge.Err != nil {
		return ge.Err
	}
	return err
}

// handle adapts an endpoint that returns its error to an http.HandlerFunc:
// the one place where an endpoint's error is written (writeErr).
func (s *Server) handle(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeErr(w, r, err)
		}
	}
}

// passUpstreamError forwards an upstream's refusal of the client's
// request: its body when it is OpenAI-shaped JSON, else wrapped in ours.
// A 401 or 403 is the platform's credential refused, never passed on.
// It returns the status written.
func passUpstreamError(w http.ResponseWriter, re *gateway.RefusedError) int {
	if re.Status == http.StatusUnauthorized || re.Status == http.StatusForbidden {
		return apierror.Write(w, errorf(weir.CodeUpstreamError, "", "the upstream refused the gateway's credential for it"))
	}
	var probe struct {
		Error *json.RawMessage `json:"error"`
	}
	if json.Unmarshal(re.Body, &probe) == nil && probe.Error != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(re.Status)
		_, _ = w.Write(re.Body)
		return re.Status
	}
	code := weir.CodeInvalidRequest
	switch re.Status {
	case http.StatusNotFound:
		code = weir.CodeNotFound
	case http.StatusRequestEntityTooLarge:
		code = weir.CodePayloadTooLarge
	}
	e := errorf(code, "", fmt.Sprintf("upstream answered %d: %s", re.Status, bytes.TrimSpace(re.Body)))
	return apierror.Write(w, e)
}
