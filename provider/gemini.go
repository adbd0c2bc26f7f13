package provider

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/dialect/gemini"
	"github.com/weir-gateway/weir/openaiwire"
)

// Gemini is the adapter for Google's Gemini API: Chat Completions calls
// translated to generateContent and streamGenerateContent, their answers
// translated back (package dialect/gemini). It serves chat only.
type Gemini struct {
	BaseURL string // e.g. https://generativelanguage.googleapis.com/v1beta
	APIKey  string // sent as x-goog-api-key
	Client  *http.Client
	// Timeout, IdleTimeout, CallTimeout and AbortGrace bound each call as
	// OpenAI's do.
	Timeout     time.Duration
	IdleTimeout time.Duration
	CallTimeout time.Duration
	AbortGrace  time.Duration
	// Clock runs the bounds and dates the answers; nil: clock.Real.
	Clock clock.Clock
}

var _ Adapter = (*Gemini)(nil)

// maxTranslated bounds an answer read whole to be translated, and one
// event of a stream: past it the answer is refused as broken.
const maxTranslated = 64 << 20

// Do sends c, a Chat Completions call, as generateContent (or, for a
// stream, streamGenerateContent with alt=sse) and returns its answer in
// Chat Completions' shape: JSON, or chat.completion.chunk events
// translated as Gemini's arrive.
func (g *Gemini) Do(ctx context.Context, c Call) (*http.Response, error) {
	if c.Path != "/chat/completions" {
		return nil, unservedPath("gemini", c.Path)
	}
	tr, err := gemini.FromChat(c.Body)
	if err != nil {
		var re *gemini.RefusedError
		if errors.As(err, &re) {
			return nil, &Error{Status: http.StatusBadRequest, Body: openaiwire.ErrorJSON(openaiwire.TypeInvalidRequest, re.Message, re.Param, "unsupported_parameter")}
		}
		return nil, &Error{Err: err}
	}
	body, err := json.Marshal(tr.Request)
	if err != nil {
		return nil, &Error{Err: fmt.Errorf("gemini: encode the request: %w", err)}
	}
	path := "/" + modelPath(tr.Model) + ":generateContent"
	h := http.Header{"Content-Type": {"application/json"}}
	if tr.Stream {
		path = "/" + modelPath(tr.Model) + ":streamGenerateContent?alt=sse"
		h.Set("Accept", "text/event-stream")
	}
	if g.APIKey != "" {
		h.Set("X-Goog-Api-Key", g.APIKey)
	}
	if ua := c.Header.Get("User-Agent"); ua != "" {
		h.Set("User-Agent", ua)
	}
	clk := g.Clock
	if clk == nil {
		clk = clock.Real
	}
	resp, err := callOpts{
		client: g.Client,
		clock:  clk,
		bounds: Bounds{Header: g.Timeout, Idle: g.IdleTimeout, Total: g.CallTimeout},
		grace:  g.AbortGrace,
	}.post(ctx, g.BaseURL, path, "", body, h)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, geminiError(resp, g.APIKey)
	}
	meta := gemini.AnswerMeta{Model: tr.Model, Created: clk.Now().Unix()}
	if tr.Stream {
		return geminiStream(resp, meta, tr.IncludeUsage)
	}
	return geminiAnswer(resp, meta)
}

// modelPath is the model's resource name: "models/<name>", unless it
// names its collection already ("tunedModels/x", "models/x").
func modelPath(model string) string {
	if strings.Contains(model, "/") {
		return model
	}
	return "models/" + url.PathEscape(model)
}

// unservedPath is the error for a call a kind does not serve.
func unservedPath(kind, path string) *Error {
	msg := fmt.Sprintf("this model's %s platform serves chat completions only, not %s", kind, path)
	return &Error{Status: http.StatusBadRequest, Body: openaiwire.ErrorJSON(openaiwire.TypeInvalidRequest, msg, "model", "unsupported_endpoint")}
}

// geminiError turns a refused call into an *Error: its body in OpenAI's
// shape, the wait a 429's RetryInfo (or Retry-After) asks for, and a
// refused key marked as the platform's.
func geminiError(resp *http.Response, apiKey string) *Error {
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &Error{Status: resp.StatusCode, Body: gemini.ErrorToChat(resp.StatusCode, raw)}
	if credentialComplaint(resp.StatusCode, raw, apiKey) {
		e.Credential, e.Body = true, nil
	}
	e.RetryAfter = gemini.RetryDelay(raw)
	if e.RetryAfter == 0 {
		if secs, err := strconv.ParseFloat(resp.Header.Get("Retry-After"), 64); err == nil && secs > 0 {
			e.RetryAfter = time.Duration(secs * float64(time.Second))
		}
	}
	return e
}

// blocked is the client error for a prompt Gemini's filter blocked.
func blocked(be *gemini.BlockedError) *Error {
	return &Error{Status: http.StatusBadRequest, Body: gemini.BlockedToChat(be)}
}

// geminiAnswer reads a whole answer, ending the call, and returns it
// translated.
func geminiAnswer(resp *http.Response, meta gemini.AnswerMeta) (*http.Response, error) {
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxTranslated+1))
	resp.Body.Close()
	if err != nil {
		return nil, err // a bound passed, or the connection broke: an *Error already
	}
	if len(raw) > maxTranslated {
		return nil, &Error{Status: http.StatusBadGateway, Body: []byte(fmt.Sprintf("gemini: an answer over %d bytes", maxTranslated))}
	}
	out, err := gemini.ToChat(raw, meta)
	if err != nil {
		var be *gemini.BlockedError
		if errors.As(err, &be) {
			return nil, blocked(be)
		}
		return nil, &Error{Status: http.StatusBadGateway, Body: []byte(err.Error()), Err: err}
	}
	return translated(resp, "application/json", int64(len(out)), io.NopCloser(bytes.NewReader(out))), nil
}

// translated is resp with another body.
func translated(resp *http.Response, contentType string, length int64, body io.ReadCloser) *http.Response {
	return &http.Response{
		Status: resp.Status, StatusCode: resp.StatusCode, Proto: resp.Proto, ProtoMajor: resp.ProtoMajor, ProtoMinor: resp.ProtoMinor,
		Header:        http.Header{"Content-Type": {contentType}},
		Body:          body,
		ContentLength: length,
		Request:       resp.Request,
	}
}

// geminiStream returns the stream translated as it arrives. It reads
// the first event first: a prompt Gemini blocked is told there, and is
// the client's error rather than a stream.
func geminiStream(resp *http.Response, meta gemini.AnswerMeta, includeUsage bool) (*http.Response, error) {
	s := &sseTranslator{up: resp.Body, br: bufio.NewReaderSize(resp.Body, 16<<10), tr: gemini.NewStream(meta, includeUsage)}
	for len(s.out) == 0 && s.err == nil {
		s.fill()
	}
	var be *gemini.BlockedError
	if errors.As(s.err, &be) {
		resp.Body.Close()
		return nil, blocked(be)
	}
	return translated(resp, "text/event-stream", -1, s), nil
}

// sseTranslator is a streamGenerateContent body read as Chat Completions
// chunks: each event is translated as soon as it has arrived whole.
type sseTranslator struct {
	up   io.ReadCloser
	br   *bufio.Reader
	tr   *gemini.Stream
	data []byte // the event being read: its data lines, joined
	long []byte // a line longer than br's buffer
	out  []byte // translated, not yet read
	err  error  // after out: how the stream ended
}

func (s *sseTranslator) Read(p []byte) (int, error) {
	for len(s.out) == 0 && s.err == nil {
		s.fill()
	}
	if len(s.out) > 0 {
		n := copy(p, s.out)
		s.out = s.out[n:]
		return n, nil
	}
	var be *gemini.BlockedError
	if errors.As(s.err, &be) {
		return 0, blocked(be) // past the first event, where Gemini never blocks
	}
	return 0, s.err
}

func (s *sseTranslator) Close() error { return s.up.Close() }

// fill reads one line and translates the event it ends, if it ends one.
func (s *sseTranslator) fill() {
	line, err := s.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		// A line longer than the buffer: gathered in s.long.
		s.long = append(s.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) && len(s.long) <= maxTranslated {
			line, err = s.br.ReadSlice('\n')
			s.long = append(s.long, line...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			s.err = &Error{Status: http.StatusBadGateway, Body: []byte(fmt.Sprintf("gemini: a stream event over %d bytes", maxTranslated))}
			return
		}
		line = s.long
	}
	line = bytes.TrimRight(line, "\r\n")
	if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
		if len(s.data) > 0 {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, bytes.TrimPrefix(data, []byte(" "))...)
	} else if len(line) == 0 && len(s.data) > 0 {
		s.event()
	}
	switch {
	case err == io.EOF:
		if len(s.data) > 0 {
			s.event()
		}
		if s.err != nil {
			return
		}
		var endErr error
		if s.out, endErr = s.tr.End(s.out); endErr != nil {
			s.err = &Error{Status: http.StatusBadGateway, Body: []byte(endErr.Error()), Err: endErr}
		} else {
			s.err = io.EOF
		}
	case err != nil:
		s.err = err // a bound passed or the connection broke: an *Error already
	}
}

// event translates the event whose data has been read.
func (s *sseTranslator) event() {
	var err error
	s.out, err = s.tr.Event(s.out, s.data)
	s.data = s.data[:0]
	if err != nil {
		var be *gemini.BlockedError
		if errors.As(err, &be) {
			s.err = err
			return
		}
		s.err = &Error{Status: http.StatusBadGateway, Body: []byte(err.Error()), Err: err}
	}
}
