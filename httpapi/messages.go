package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/apierror"
	"github.com/weir-gateway/weir/dialect/anthropic"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/internal/bodyread"
	"github.com/weir-gateway/weir/openaiwire"
	"github.com/weir-gateway/weir/tokens"
)

// Anthropic's Messages API in front: POST /v1/messages goes as it came
// to a candidate on a platform that speaks the Messages API itself (kind
// anthropic), and its answer comes back untouched; to any other
// candidate it is translated to Chat Completions, and its answer
// translated back, a stream chunk by chunk. Either way it takes the way
// /v1/chat/completions takes (the key, the queue, the scopes, fallbacks,
// edge nodes for the translation), and its errors are written in
// Anthropic's shape with Anthropic's statuses. The same Weir keys let a
// client in, by x-api-key (as Anthropic's SDKs send them) or as a bearer
// token.

// epMessages is POST /v1/messages: a chat model's endpoint, under its
// own name in metrics and usage records.
var epMessages = endpoint{name: "messages", path: epChat.path, kind: weir.KindChat, required: epChat.required}

// createMessage serves POST /v1/messages. What the translation cannot
// carry (thinking, a tool_result's is_error, a document, a server tool)
// only a candidate sent the request as it came can serve.
func (s *Server) createMessage(w http.ResponseWriter, r *http.Request) {
	start := s.deps.Clock.Now()
	var native *gateway.Native
	c, err := s.prepare(w, r, epMessages, func(body []byte) (*request, *apiError) {
		native = &gateway.Native{API: gateway.APIMessages, Path: "/messages", Body: &request{body: body}}
		req, chat, perr := messagesToChat(body)
		if aerr := checkMessagesEndUser(req); aerr != nil {
			return nil, aerr
		}
		if perr != nil && perr.Unsupported {
			native.Only = perr.Param
			return nativeMessagesRequest(req, body)
		}
		if perr != nil {
			return nil, errorf(weir.CodeInvalidRequest, perr.Param, perr.Message)
		}
		return translatedRequest(epMessages, chat)
	})
	if err != nil {
		s.deps.Metrics.ObserveHTTP(epMessages.name, s.writeAnthropicErr(w, r, err), s.deps.Clock.Now().Sub(start))
		return
	}
	if native.Only != "" {
		c.Body = native.Body // never sent: only a candidate sent Native serves it
	}
	c.Native = native
	w.Header().Set("Request-Id", infoOf(w).id)
	s.serve(w, r, epMessages, c, &messagesAnswer{s: s, out: &c.out}, start)
}

// checkMessagesEndUser refuses the end user a Messages request's
// metadata.user_id names if weir.ValidateEndUser does (req is nil when
// the body did not parse).
func checkMessagesEndUser(req *anthropic.Request) *apiError {
	if req == nil || req.Metadata == nil {
		return nil
	}
	return checkEndUser("metadata.user_id", req.Metadata.UserID)
}

// messagesToChat reads a Messages request's body and translates it to
// Chat Completions.
func messagesToChat(body []byte) (*anthropic.Request, *openaiwire.ChatRequest, *anthropic.RequestError) {
	req, perr := anthropic.ParseRequest(body)
	if perr != nil {
		return nil, nil, perr
	}
	if req.MaxTokens < 1 {
		return nil, nil, &anthropic.RequestError{Param: "max_tokens", Message: "max_tokens: field required, a positive integer"}
	}
	chat, perr := anthropic.ChatRequestOf(req)
	return req, chat, perr
}

// nativeMessagesRequest is what the gateway needs of a Messages request
// that only a platform speaking the Messages API can serve: its model,
// stream flag, max_tokens and the token estimate.
func nativeMessagesRequest(req *anthropic.Request, body []byte) (*request, *apiError) {
	if len(req.Model) > maxModelName {
		return nil, errorf(weir.CodeInvalidRequest, "model", fmt.Sprintf("model is %d bytes long; at most %d are allowed", len(req.Model), maxModelName))
	}
	r := &request{body: body, model: req.Model, stream: req.Stream, maxTokens: req.MaxTokens}
	if req.Metadata != nil {
		r.endUser = req.Metadata.UserID
	}
	prompt := anthropic.EstimateInputTokens(req)
	r.wants = weir.Wants{PromptTokens: prompt, MaxTokens: r.maxTokens, Stream: r.stream, Tools: len(req.Tools) > 0}
	r.estimate = tokens.Add(prompt, r.maxTokens)
	return r, nil
}

// messagesAnswer writes the gateway's Chat Completions answer as a
// Messages answer: a stream as it arrives, chunk by chunk; a whole answer
// once the gateway has written it all (end), as it must be read whole to
// be translated. A platform's own Messages answer (Head.Native) it passes
// through.
type messagesAnswer struct {
	s      *Server
	out    *answerWriter
	native bool                      // the answer is the platform's own
	stream *anthropic.MessagesStream // a streamed answer's translation
	head   gateway.Head              // a whole answer's, held until end
	body   []byte                    // a whole answer, held until end
	held   bool
}

func (a *messagesAnswer) Start(head gateway.Head) {
	if head.Native {
		a.native = true
		a.out.Start(head)
		return
	}
	if strings.HasPrefix(head.ContentType, "text/event-stream") {
		a.stream = anthropic.NewMessagesStream(&a.out.clientWriter)
		a.out.Start(head)
		return
	}
	a.head, a.held = head, true
}

func (a *messagesAnswer) Write(p []byte) (int, error) {
	if a.native {
		return a.out.Write(p)
	}
	if a.stream != nil {
		return a.stream.Write(p)
	}
	a.body = append(a.body, p...)
	return len(p), nil
}

func (a *messagesAnswer) Flush() error {
	if a.native || a.stream != nil {
		return a.out.Flush()
	}
	return nil
}

// StreamError ends a stream the upstream broke off with Anthropic's
// error event; a passed-through one, after the events that got through.
func (a *messagesAnswer) StreamError(err error) {
	_, d := anthropicError(answerOf(err))
	switch {
	case a.native:
		if _, err := a.out.Write(anthropic.ErrorEvent(d)); err == nil {
			_ = a.out.Flush()
		}
	case a.stream != nil:
		if a.stream.Fail(d) == nil {
			_ = a.out.Flush()
		}
	}
}

var (
	_ ender     = (*messagesAnswer)(nil)
	_ errWriter = (*messagesAnswer)(nil)
)

func (a *messagesAnswer) writeErr(w http.ResponseWriter, r *http.Request, err error) int {
	return a.s.writeAnthropicErr(w, r, err)
}

func (a *messagesAnswer) end(context.Context) {
	switch {
	case a.stream != nil:
		if a.stream.End() == nil {
			_ = a.out.Flush()
		}
	case a.held:
		// (A client that fails to take it now is past the gateway's
		// notice: its outcome stands.)
		out, err := anthropic.AnswerFromChat(a.body)
		head := a.head
		if err != nil {
			head.Status = http.StatusInternalServerError
			out = anthropic.ErrorJSON(anthropic.ErrorDetail{Type: anthropic.ErrAPI, Message: "the upstream's answer could not be translated: " + err.Error(),
				Code: string(weir.CodeUpstreamError)}, "")
		}
		head.ContentType, head.ContentLength = "application/json", int64(len(out))
		a.out.Start(head)
		if _, err := a.out.Write(out); err == nil {
			_ = a.out.Flush() // before the usage record and the access log line
		}
	}
}

// anthropicError is the status and the error of Anthropic's that answer
// e: its code's meaning in Anthropic's table, Weir's code beside it.
func anthropicError(e *apiError) (int, anthropic.ErrorDetail) {
	d := anthropic.ErrorDetail{Message: e.Message, Code: string(e.Code)}
	status := e.StatusOf()
	switch {
	case e.Client:
		status = http.StatusBadRequest
	case e.Code == weir.CodeQueueTimeout, e.Code == weir.CodeNoCandidate, e.Code == weir.CodeStoreUnavailable:
		// No capacity in time, or none at all right now: Anthropic's
		// passing overload, which its SDKs retry.
		status = anthropic.StatusOverloaded
	case e.Code == weir.CodeUpstreamError, e.Code == weir.CodeInternal:
		status = http.StatusInternalServerError
	}
	d.Type = anthropic.ErrorType(status)
	return status, d
}

// writeAnthropicErr answers err in Anthropic's error shape, as writeErr
// does in OpenAI's, and returns the status written. An upstream's own
// refusal keeps its status and message.
func (s *Server) writeAnthropicErr(w http.ResponseWriter, r *http.Request, err error) int {
	var re *gateway.RefusedError
	var status int
	var d anthropic.ErrorDetail
	var e *apiError
	if errors.As(err, &re) {
		status, d = refusalOf(re)
	} else {
		e = answerOf(err)
		infoOf(w).access.code = e.Code
		if e.Code == weir.CodeInternal {
			var ge *gateway.Error
			if !errors.As(err, &ge) {
				infoOf(w).log().Error("request failed", "error", err)
			}
		}
		status, d = anthropicError(e)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e != nil && e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64((e.RetryAfter+time.Second-1)/time.Second), 10))
	}
	if e != nil && e.NoRetry {
		h.Set(apierror.HeaderShouldRetry, "false")
	}
	id := infoOf(w).id
	h.Set("Request-Id", id)
	w.WriteHeader(status)
	_, _ = w.Write(anthropic.ErrorJSON(d, id))
	return status
}

// refusalOf is an upstream's refusal of the client's request in
// Anthropic's terms: its status, its type and message (Anthropic's own
// error's; an OpenAI error's message, or its body's text). A refused credential is the gateway's, never the
// client's to see.
func refusalOf(re *gateway.RefusedError) (int, anthropic.ErrorDetail) {
	if re.Status == http.StatusUnauthorized || re.Status == http.StatusForbidden {
		return http.StatusInternalServerError, anthropic.ErrorDetail{Type: anthropic.ErrAPI,
			Message: "the upstream refused the gateway's credential for it", Code: string(weir.CodeUpstreamError)}
	}
	var ab anthropic.ErrorBody
	if json.Unmarshal(re.Body, &ab) == nil && ab.Type == "error" && ab.Error.Type != "" {
		// Anthropic's own, from a request passed through.
		return re.Status, anthropic.ErrorDetail{Type: ab.Error.Type, Message: ab.Error.Message}
	}
	var probe struct {
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	msg := string(bytes.TrimSpace(re.Body))
	if json.Unmarshal(re.Body, &probe) == nil && probe.Error != nil && probe.Error.Message != "" {
		msg = probe.Error.Message
	}
	return re.Status, anthropic.ErrorDetail{Type: anthropic.ErrorType(re.Status), Message: msg}
}

// countTokens answers POST /v1/messages/count_tokens, once the key may
// use its model: the count of the anthropic platform of the model's
// first candidate, asked without queueing (counting costs no capacity
// there), its answer passed back as it came; for any other candidate (or
// if the platform cannot count now) Weir's own estimate. It queues for
// nothing.
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) {
	start := s.deps.Clock.Now()
	status, err := s.countTokensOf(w, r)
	if err != nil {
		status = s.writeAnthropicErr(w, r, err)
	}
	s.deps.Metrics.ObserveHTTP("count_tokens", status, s.deps.Clock.Now().Sub(start))
}

func (s *Server) countTokensOf(w http.ResponseWriter, r *http.Request) (int, error) {
	key, err := s.authenticate(w, r)
	if err != nil {
		return 0, err
	}
	if aerr := s.limitBody(w, r); aerr != nil {
		return 0, aerr
	}
	body, err := bodyread.Read(r.Body, r.ContentLength, -1)
	if err != nil {
		return 0, s.bodyError(err, "could not read request body")
	}
	req, perr := anthropic.ParseRequest(body)
	if perr != nil {
		return 0, errorf(weir.CodeInvalidRequest, perr.Param, perr.Message)
	}
	ask, aerr := askOf(r)
	if aerr != nil {
		return 0, aerr
	}
	ask.Model, ask.Kind, ask.DefaultMaxWait = req.Model, weir.KindChat, s.cfg.DefaultMaxWait
	g, err := s.deps.Gateway.Prepare(r.Context(), key, ask)
	if err != nil {
		return 0, err
	}
	w.Header().Set("Request-Id", infoOf(w).id)
	if tc, ok := s.deps.Gateway.(TokenCounter); ok {
		resp, ok, err := tc.CountTokens(r.Context(), g, &request{body: body}, r.Header)
		if err != nil {
			return 0, err
		}
		if ok {
			return passCount(w, resp), nil
		}
	}
	out, _ := json.Marshal(anthropic.CountTokens{InputTokens: anthropic.EstimateInputTokens(req)}) // an int: cannot fail
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(out, '\n'))
	return http.StatusOK, nil
}

// passCount writes an upstream's count_tokens answer as it came.
func passCount(w http.ResponseWriter, resp *http.Response) int {
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, io.LimitReader(resp.Body, maxCountAnswer))
	return resp.StatusCode
}

// maxCountAnswer bounds a count_tokens answer passed on: a few bytes of
// JSON.
const maxCountAnswer = 1 << 20
