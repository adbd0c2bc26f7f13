package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/dialect/responses"
	"github.com/weir-gateway/weir/gateway"
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
// back untouched.
func (s *Server) createResponse(w http.ResponseWriter, r *http.Request) {
	start := s.deps.Clock.Now()
	var tr *responses.Translation
	var native *gateway.Native
	c, err := s.prepare(w, r, epResponses, func(body []byte) (*request, *apiError) {
		native = &gateway.Native{Path: "/responses", Body: &request{body: body}}
		rq, err := responses.Parse(body)
		if err != nil {
			return nil, responsesError(err)
		}
		chat, err := rq.ChatBody()
		if err != nil {
			return nil, responsesError(err)
		}
		tr = responses.NewTranslation(rq, s.deps.Clock.Now())
		return decodeRequest(epResponses, chat)
	})
	if err != nil {
		s.deps.Metrics.ObserveHTTP(epResponses.name, s.writeErr(w, r, err), s.deps.Clock.Now().Sub(start))
		return
	}
	c.Native = native
	s.serve(w, r, epResponses, c, &responsesAnswer{out: &c.out, tr: tr, stream: c.Stream}, start)
}

// responsesError is the answer to a request package responses refused:
// invalid_request for a malformed one, no_candidate (a 400) for one that
// no candidate could serve, all of them speaking Chat Completions.
func responsesError(err error) *apiError {
	var e *responses.Error
	if !errors.As(err, &e) {
		return errorf(weir.CodeInvalidRequest, "", err.Error())
	}
	if e.Unsupported {
		return &apiError{Code: weir.CodeNoCandidate, Param: e.Param, Client: true,
			Message: "no candidate can serve this request: Weir translates the Responses API to Chat Completions, and " + e.Message}
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
		a.seq = -1
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
	if !json.Valid(a.body) {
		return len(p), nil
	}
	return len(p), a.send()
}

// send writes the translation of a whole answer, or a 502 when the
// upstream's answer was no chat completion.
func (a *responsesAnswer) send() error {
	a.sent = true
	out, err := a.tr.FromChat(a.body)
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
		_ = a.send()
	}
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

// noStoredResponse answers GET and DELETE /v1/responses/{id} and its
// cancel and input items: Weir keeps no response.
func (s *Server) noStoredResponse(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.authenticate(r); err != nil {
		return err
	}
	return errorf(weir.CodeNotFound, "response_id", fmt.Sprintf(
		"no response %q: Weir stores no responses, so none can be retrieved, deleted or cancelled; keep what you need of a response's output and send it as input", r.PathValue("id")))
}
