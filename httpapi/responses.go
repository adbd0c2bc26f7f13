package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/dialect/responses"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/openaiwire"
	"github.com/weir-gateway/weir/provider"
)

// epResponses is POST /v1/responses: OpenAI's Responses API, served as
// the Chat Completions it is translated to.
var epResponses = endpoint{name: "responses", path: "/chat/completions", kind: weir.KindChat, required: []string{"messages"}}

// createResponse serves POST /v1/responses: the request is translated to
// Chat Completions (package responses) and then goes the way a chat
// completion goes — the queue, the scopes, fallbacks, edge nodes — and
// its answer, whole or streamed, is translated back. A candidate on a
// platform that speaks the Responses API itself (kinds openai and azure) is
// sent the request as the client sent it instead, and its answer passes
// back untouched. What no translation carries (a built-in tool, stored
// state, reasoning items) only such a candidate serves; a response it
// keeps is bound to its platform, and a request continuing a bound
// response (previous_response_id) goes there.
func (s *Server) createResponse(w http.ResponseWriter, r *http.Request) {
	start := s.deps.Clock.Now()
	var tr *responses.Translation
	var native *gateway.Native
	var previous string
	c, err := s.prepare(w, r, epResponses, func(body []byte) (*request, *apiError) {
		native = &gateway.Native{API: gateway.APIResponses, Path: "/responses", Body: &request{body: body}}
		rq, err := responses.Parse(body)
		var chat *openaiwire.ChatRequest
		if err == nil {
			chat, err = rq.ChatRequest()
		}
		var e *responses.Error
		if errors.As(err, &e) && e.Unsupported {
			// Untranslatable: for the candidates that take it as it is.
			native.Only = e.Param
			req, aerr := nativeRequest(body)
			if aerr == nil {
				previous = req.previous
			}
			return req, aerr
		}
		if err != nil {
			return nil, responsesError(err)
		}
		tr = responses.NewTranslation(rq, s.deps.Clock.Now())
		return translatedRequest(epResponses, chat)
	})
	if err == nil && previous != "" {
		native.Platform, err = s.previousPlatform(r.Context(), c.KeyID, previous)
	}
	if err != nil {
		s.deps.Metrics.ObserveHTTP(epResponses.name, s.writeErr(w, r, err), s.deps.Clock.Now().Sub(start))
		return
	}
	if native.Only != "" {
		c.Body = native.Body // never sent: only a candidate sent Native serves it
	}
	c.Native = native
	a := &responsesAnswer{out: &c.out, tr: tr, stream: c.Stream}
	if s.deps.Responses != nil {
		ctx, keyID, ri := r.Context(), c.KeyID, infoOf(w)
		a.bind = func(id, platform string) {
			if err := s.deps.Responses.BindResponse(ctx, id, platform, keyID); err != nil {
				ri.log().Warn("could not bind a response to its platform; it cannot be continued or retrieved through Weir",
					"response_id", id, "platform", platform, "error", err)
			}
		}
	}
	s.serve(w, r, epResponses, c, a, start)
}

// previousPlatform is the platform holding the response a request
// continues, if it is bound: "" if Weir bound no response of that id (it
// goes to any candidate that takes the request as it is), 404 if it is
// another key's (as OpenAI answers another account's).
func (s *Server) previousPlatform(ctx context.Context, keyID, id string) (string, error) {
	if s.deps.Responses == nil {
		return "", nil
	}
	platform, err := s.deps.Responses.ResponsePlatform(ctx, keyID, id)
	switch {
	case errors.Is(err, gateway.ErrResponseOfAnotherKey):
		return "", errorf(weir.CodeNotFound, "previous_response_id", fmt.Sprintf("Previous response with id %q not found.", id))
	case errors.Is(err, gateway.ErrResponseNotFound):
		return "", nil
	case err != nil:
		return "", err
	}
	return platform, nil
}

// nativeRequest is what the gateway needs of a Responses request that
// only a platform speaking the Responses API can serve, read from the
// body as the client sent it: its model, stream flag, max_output_tokens
// and the token estimate, and the response it continues.
func nativeRequest(body []byte) (*request, *apiError) {
	var v struct {
		Model           string            `json:"model"`
		Stream          *bool             `json:"stream"`
		MaxOutputTokens *int64            `json:"max_output_tokens"`
		Tools           []json.RawMessage `json:"tools"`
		Previous        *string           `json:"previous_response_id"`
		User            string            `json:"user"`
		Safety          string            `json:"safety_identifier"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, errorf(weir.CodeInvalidRequest, "", "request body is not a valid Responses request: "+err.Error())
	}
	switch {
	case v.Model == "":
		return nil, errorf(weir.CodeInvalidRequest, "model", "you must provide a model parameter")
	case len(v.Model) > maxModelName:
		return nil, errorf(weir.CodeInvalidRequest, "model", fmt.Sprintf("model is %d bytes long; at most %d are allowed", len(v.Model), maxModelName))
	case v.MaxOutputTokens != nil && *v.MaxOutputTokens < 1:
		return nil, errorf(weir.CodeInvalidRequest, "max_output_tokens", "max_output_tokens must be a positive integer")
	}
	r := &request{body: body, model: v.Model, stream: v.Stream != nil && *v.Stream}
	var aerr *apiError
	if r.endUser, aerr = endUserOf(v.Safety, v.User); aerr != nil {
		return nil, aerr
	}
	if v.MaxOutputTokens != nil {
		r.maxTokens = *v.MaxOutputTokens
	}
	if v.Previous != nil {
		r.previous = *v.Previous
	}
	r.wants.Tools = len(v.Tools) > 0
	r.countPrompt(true) // as decodeRequest counts a chat completion
	return r, nil
}

// responsesError is the answer to a request package responses found
// malformed: invalid_request, naming the parameter.
func responsesError(err error) *apiError {
	var e *responses.Error
	if !errors.As(err, &e) {
		return errorf(weir.CodeInvalidRequest, "", err.Error())
	}
	return errorf(weir.CodeInvalidRequest, e.Param, e.Message)
}

// responsesAnswer is where the gateway writes the answer to a Responses
// request: a Chat Completions answer it translates for out, a stream
// event by event as its chunks arrive, a whole answer once it is all in;
// a platform's own Responses answer (Head.Native) it passes through.
type responsesAnswer struct {
	out    *answerWriter
	tr     *responses.Translation
	stream bool
	// native: the answer is the platform's own, passed through; seq is
	// the last sequence_number seen in its stream.
	native bool
	seq    int64
	// bind, if set, binds a response the platform keeps to it, once its
	// id is read (bound), before the answer that names it goes on;
	// first holds a stream's start until its first event is whole.
	bind     func(id, platform string)
	platform string
	bound    bool
	first    []byte
	// sse translates a stream, from its start.
	sse *responses.Writer
	// head and body are a whole answer's, until it is all in and
	// translated (sent).
	head gateway.Head
	body []byte
	// begun: the gateway started the answer. sent: the translation of a
	// whole answer went out. failed: a write to the client failed.
	begun, sent, failed bool
}

var _ gateway.Answer = (*responsesAnswer)(nil)

// Start implements gateway.Answer.
func (a *responsesAnswer) Start(head gateway.Head) {
	a.begun, a.head, a.native = true, head, head.Native
	if a.native {
		a.seq, a.platform = -1, head.Platform
		a.out.Start(head)
		return
	}
	if !a.stream {
		return // the translation's headers go out with it
	}
	a.out.Start(gateway.Head{Status: head.Status, ContentType: "text/event-stream; charset=utf-8", CacheControl: "no-cache",
		ContentLength: -1, Waited: head.Waited})
	a.sse = &responses.Writer{W: &a.out.clientWriter, S: a.tr.NewStream()}
}

// Write implements gateway.Answer: a stream's bytes are translated as
// they come; a whole answer's are kept until they make the whole JSON
// answer (the gateway writes it in one piece).
func (a *responsesAnswer) Write(p []byte) (int, error) {
	if a.native {
		if a.stream {
			a.seq = max(a.seq, lastSequence(p))
		}
		if a.bind != nil && !a.bound {
			a.bindFrom(p)
		}
		n, err := a.out.Write(p)
		a.failed = a.failed || err != nil
		return n, err
	}
	if a.stream {
		n, err := a.sse.Write(p)
		a.failed = a.failed || err != nil
		return n, err
	}
	a.body = append(a.body, p...)
	// The translation reads the answer once: JSON that is not whole yet
	// is a syntax error, which waits for the rest.
	out, err := a.tr.FromChat(a.body)
	if err != nil && notWhole(err) {
		return len(p), nil
	}
	return len(p), a.send(out, err)
}

// notWhole reports whether err is the translation's of an answer that is
// not whole JSON.
func notWhole(err error) bool {
	var se *json.SyntaxError
	return errors.As(err, &se)
}

// send writes out, the translation of a whole answer, or a 502 when the
// upstream's answer was no chat completion (err).
func (a *responsesAnswer) send(out []byte, err error) error {
	a.sent = true
	head := a.head
	head.ContentType, head.ContentDisposition = "application/json", ""
	if err != nil {
		e := errorf(weir.CodeUpstreamError, "", err.Error())
		head.Status = e.StatusOf()
		out = e.JSON()
	}
	head.ContentLength = int64(len(out))
	a.out.Start(head)
	_, err = a.out.Write(out)
	a.failed = err != nil
	return err
}

// Flush implements gateway.Answer: a stream's events go out as they are
// made; a whole answer has nothing to flush before it is sent.
func (a *responsesAnswer) Flush() error {
	if !a.out.started {
		return nil
	}
	err := a.out.Flush()
	a.failed = a.failed || err != nil
	return err
}

// StreamError implements gateway.Answer: a stream the upstream broke
// off ends with response.failed, carrying Weir's code.
func (a *responsesAnswer) StreamError(err error) {
	e := answerOf(err)
	if a.native {
		a.nativeStreamError(e)
		return
	}
	if a.sse == nil {
		return
	}
	if a.sse.Fail(string(e.Code), e.Message) == nil {
		_ = a.out.Flush()
	}
}

// end finishes the answer once the gateway is done with it: a stream's
// terminal event, if the upstream's stream ended without one being made
// (response.completed if the model had finished, else response.failed);
// a whole answer that never became JSON, a 502. Nothing is written to a
// client that is gone or stopped reading.
func (a *responsesAnswer) end(ctx context.Context) {
	if !a.begun || a.native || a.failed || ctx.Err() != nil {
		return
	}
	switch {
	case a.stream:
		if a.sse.Close() == nil {
			_ = a.out.Flush()
		}
	case !a.sent:
		_ = a.send(a.tr.FromChat(a.body))
	}
}

// maxFirstEvent bounds what is held of a stream's start to find the
// response's id in its first event.
const maxFirstEvent = 1 << 20

// bindFrom binds the response that p (a whole answer, or the next piece
// of a stream) names, if the platform keeps it (store), once its id can
// be read: a whole answer's, or the response of a stream's first event.
func (a *responsesAnswer) bindFrom(p []byte) {
	var resp struct {
		ID    string `json:"id"`
		Store *bool  `json:"store"`
	}
	if !a.stream {
		a.bound = true
		if json.Unmarshal(p, &resp) != nil {
			return
		}
	} else {
		a.first = append(a.first, p...)
		data, ok := firstEventData(a.first)
		if !ok {
			if len(a.first) > maxFirstEvent {
				a.bound, a.first = true, nil
			}
			return
		}
		a.bound, a.first = true, nil
		var ev struct {
			Response json.RawMessage `json:"response"`
		}
		if json.Unmarshal(data, &ev) != nil || json.Unmarshal(ev.Response, &resp) != nil {
			return
		}
	}
	if resp.ID != "" && (resp.Store == nil || *resp.Store) {
		a.bind(resp.ID, a.platform)
	}
}

// firstEventData is the data of the first whole event of an SSE stream's
// start b.
func firstEventData(b []byte) ([]byte, bool) {
	end := bytes.Index(b, []byte("\n\n"))
	if end < 0 {
		return nil, false
	}
	for _, line := range bytes.Split(b[:end], []byte("\n")) {
		if data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:")); ok {
			return bytes.TrimSpace(data), true
		}
	}
	return nil, true
}

// nativeStreamError ends a passed-through stream the upstream broke off
// with the Responses API's error event, numbered after the last event
// that got through.
func (a *responsesAnswer) nativeStreamError(e *apiError) {
	ev := struct {
		Type           string  `json:"type"`
		Code           string  `json:"code"`
		Message        string  `json:"message"`
		Param          *string `json:"param"`
		SequenceNumber int64   `json:"sequence_number"`
	}{Type: "error", Code: string(e.Code), Message: e.Message, SequenceNumber: a.seq + 1}
	b, _ := json.Marshal(ev) // strings and a number: cannot fail
	b = append(append([]byte("event: error\ndata: "), b...), "\n\n"...)
	if _, err := a.out.Write(b); err == nil {
		_ = a.out.Flush()
	}
}

// lastSequence is the last sequence_number in p, a piece of a Responses
// stream; -1 if it has none.
func lastSequence(p []byte) int64 {
	const key = `"sequence_number":`
	i := bytes.LastIndex(p, []byte(key))
	if i < 0 {
		return -1
	}
	rest := bytes.TrimLeft(p[i+len(key):], " ")
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	n, err := strconv.ParseInt(string(rest[:end]), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// responseCall serves GET and DELETE /v1/responses/{id}, its cancel and
// its input items: passed to the platform that holds the response, for
// the key whose request made it. Any other key, like an id Weir did not
// bind, gets 404.
func (s *Server) responseCall(w http.ResponseWriter, r *http.Request) error {
	key, err := s.authenticate(w, r)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	notFound := errorf(weir.CodeNotFound, "response_id", fmt.Sprintf(
		"no response %q: Weir knows a response only when a platform that keeps responses made it, and only for the key whose request made it", id))
	if s.deps.Responses == nil {
		return notFound
	}
	path := "/responses/" + url.PathEscape(id)
	if _, sub, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v1/responses/"), "/"); ok {
		path += "/" + sub // cancel, input_items
	}
	if r.URL.RawQuery != "" {
		path += "?" + r.URL.RawQuery
	}
	resp, err := s.deps.Responses.ResponseCall(r.Context(), key.ID, id, provider.Call{Method: r.Method, Path: path, Header: r.Header})
	if errors.Is(err, gateway.ErrResponseNotFound) {
		return notFound
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	for _, h := range []string{"Content-Type", "Cache-Control"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	// A background response's stream (GET ?stream=true) goes on as it
	// comes.
	rc := http.NewResponseController(w)
	buf := make([]byte, 16<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return nil
			}
			_ = rc.Flush()
		}
		if err != nil {
			return nil
		}
	}
}
