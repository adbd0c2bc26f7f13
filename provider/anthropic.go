package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/dialect/anthropic"
	"github.com/weir-gateway/weir/openaiwire"
)

// Anthropic is the adapter for Anthropic's Messages API (kind
// anthropic). It takes Chat Completions calls, sends them as Messages
// requests to {BaseURL}/messages with the x-api-key and anthropic-version
// headers, and answers in Chat Completions: a whole answer translated
// once read, a stream event by event as it arrives. It serves chat alone:
// another call is refused with a 400 that names it.
//
// A 429 says when to come back by retry-after or, without one, by the
// reset time of the anthropic-ratelimit-* limit it exhausted; a 529
// overloaded_error is a passing overload, retried elsewhere and pausing
// the platform model for its retry-after, or OverloadPause. A 401 or 403
// is the platform's credential refused; another 4xx goes back to the
// client in OpenAI's error shape.
//
// A Messages request itself (Path /messages, or /messages/count_tokens)
// is passed through: sent as it came, with the client's anthropic-version
// (Version if it sent none) and anthropic-beta, its answer and its
// stream returned untouched and a refusal in Anthropic's own shape.
type Anthropic struct {
	BaseURL string // e.g. https://api.anthropic.com/v1
	APIKey  string
	Client  *http.Client
	// Timeout, IdleTimeout, CallTimeout and AbortGrace bound each call as
	// OpenAI's do.
	Timeout     time.Duration
	IdleTimeout time.Duration
	CallTimeout time.Duration
	AbortGrace  time.Duration
	// Clock runs the bounds, dates the answers and reads rate-limit
	// resets; nil: clock.Real.
	Clock clock.Clock
}

var _ Adapter = (*Anthropic)(nil)

// OverloadPause is how long a platform model pauses for an overload
// whose answer does not say.
const OverloadPause = 2 * time.Second

// maxAnswerBody bounds a whole Messages answer read for translation; the
// gateway bounds the translation by its own limit.
const maxAnswerBody = 64 << 20

// Do sends c and returns the translated response when the upstream
// answers 2xx.
func (a *Anthropic) Do(ctx context.Context, c Call) (*http.Response, error) {
	if c.Path == "/messages" || c.Path == "/messages/count_tokens" {
		return a.passThrough(ctx, c)
	}
	if c.Path != "/chat/completions" {
		return nil, refusal("", fmt.Sprintf("the anthropic platform kind serves chat completions only, not %s", c.Path))
	}
	mreq, rerr := anthropic.RequestFromChat(c.Body, anthropic.DefaultMaxTokens)
	if rerr != nil {
		return nil, refusal(rerr.Param, rerr.Message)
	}
	body, err := json.Marshal(mreq)
	if err != nil {
		return nil, &Error{Err: fmt.Errorf("encode a Messages request: %w", err)}
	}
	clk := a.clock()
	resp, err := a.post(ctx, "/messages", body, a.header(c, anthropic.Version))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, a.failure(resp, clk.Now(), false)
	}
	created := clk.Now().Unix()
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	if c.Stream {
		resp.Header.Set("Content-Type", "text/event-stream")
		resp.Body = &anthropicStream{s: anthropic.NewChatStream(resp.Body, created)}
	} else {
		resp.Header.Set("Content-Type", "application/json")
		resp.Body = &anthropicAnswer{up: resp.Body, created: created}
	}
	return resp, nil
}

// passThrough sends c, a Messages request as the client sent it, and
// returns the upstream's 2xx answer untouched.
func (a *Anthropic) passThrough(ctx context.Context, c Call) (*http.Response, error) {
	version := c.Header.Get("Anthropic-Version")
	if version == "" {
		version = anthropic.Version
	}
	resp, err := a.post(ctx, c.Path, c.Body, a.header(c, version))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, a.failure(resp, a.clock().Now(), true)
	}
	return resp, nil
}

// header is the header of a call to the Messages API for c: the key, the
// version, and the client's beta features and user agent.
func (a *Anthropic) header(c Call, version string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}, "Anthropic-Version": {version}, "Accept": {"application/json"}}
	if c.Stream {
		h.Set("Accept", "text/event-stream")
	}
	if a.APIKey != "" {
		h.Set("X-Api-Key", a.APIKey)
	}
	for _, k := range []string{"User-Agent", "Anthropic-Beta"} {
		if v := c.Header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	return h
}

func (a *Anthropic) clock() clock.Clock {
	if a.Clock == nil {
		return clock.Real
	}
	return a.Clock
}

// post sends body to path under the base URL, within the adapter's
// bounds.
func (a *Anthropic) post(ctx context.Context, path string, body []byte, h http.Header) (*http.Response, error) {
	return callOpts{
		client: a.Client,
		clock:  a.clock(),
		bounds: Bounds{Header: a.Timeout, Idle: a.IdleTimeout, Total: a.CallTimeout},
		grace:  a.AbortGrace,
	}.post(ctx, a.BaseURL, path, "", body, h)
}

// failure is the *Error of an answer that is not 2xx: its body in
// OpenAI's error shape (in Anthropic's, as it came, for a request passed
// through: native), its wait and its overload read from Anthropic's
// headers.
func (a *Anthropic) failure(resp *http.Response, now time.Time, native bool) error {
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	d, ok := anthropic.ParseError(raw)
	if !ok {
		d = anthropic.ErrorDetail{Type: anthropic.ErrorType(resp.StatusCode), Message: strings.TrimSpace(string(raw))}
		if d.Message == "" {
			d.Message = http.StatusText(resp.StatusCode)
		}
	}
	e := &Error{Status: resp.StatusCode, Body: openaiwire.ErrorJSON(d.Type, d.Message, "", "")}
	switch {
	case native && ok:
		e.Body = raw
	case native:
		e.Body = anthropic.ErrorJSON(d, "")
	}
	e.Overloaded = resp.StatusCode == anthropic.StatusOverloaded || d.Type == anthropic.ErrOverloaded
	if credentialComplaint(resp.StatusCode, raw, a.APIKey) {
		e.Credential, e.Body = true, nil
	}
	var given bool
	e.RetryAfter, given = retryAfterOf(resp.Header)
	switch {
	case given:
	case resp.StatusCode == http.StatusTooManyRequests:
		e.RetryAfter = rateLimitReset(resp.Header, now)
	case e.Overloaded:
		e.RetryAfter = OverloadPause
	}
	return e
}

// rateLimitReset is how long until the limits an answer says are
// exhausted (anthropic-ratelimit-<limit>-remaining: 0) reset, the latest
// of them (anthropic-ratelimit-<limit>-reset, an RFC 3339 time); 0 when
// none is.
func rateLimitReset(h http.Header, now time.Time) time.Duration {
	var wait time.Duration
	for _, limit := range []string{"requests", "tokens", "input-tokens", "output-tokens"} {
		prefix := "Anthropic-Ratelimit-" + limit
		if strings.TrimSpace(h.Get(prefix+"-Remaining")) != "0" {
			continue
		}
		if at, err := time.Parse(time.RFC3339, h.Get(prefix+"-Reset")); err == nil {
			wait = max(wait, at.Sub(now))
		}
	}
	return wait
}

// refusal is a call the adapter refuses before sending it: a 400 in
// OpenAI's error shape, for the client.
func refusal(param, msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Body: openaiwire.ErrorJSON(openaiwire.TypeInvalidRequest, msg, param, ""), Err: errors.New(msg)}
}

// anthropicAnswer is a whole Messages answer read as a chat.completion:
// read and translated at the first Read.
type anthropicAnswer struct {
	up      io.ReadCloser
	created int64
	rd      *bytes.Reader
}

func (b *anthropicAnswer) Read(p []byte) (int, error) {
	if b.rd == nil {
		raw, err := io.ReadAll(io.LimitReader(b.up, maxAnswerBody+1))
		if err != nil {
			return 0, err // the body's own *Error, or the client gone
		}
		if len(raw) > maxAnswerBody {
			return 0, &Error{Status: http.StatusBadGateway, Err: fmt.Errorf("the upstream's answer is larger than %d bytes", maxAnswerBody)}
		}
		out, err := anthropic.AnswerToChat(raw, b.created)
		if err != nil {
			return 0, &Error{Status: http.StatusBadGateway, Body: openaiwire.ErrorJSON(openaiwire.TypeServer, "the upstream's answer is not a Messages answer", "", ""), Err: err}
		}
		b.rd = bytes.NewReader(out)
	}
	return b.rd.Read(p)
}

func (b *anthropicAnswer) Close() error { return b.up.Close() }

// anthropicStream is a Messages stream read as Chat Completions chunks;
// an error event in it fails the read as the upstream's *Error, which
// pauses the platform model for an overload or a rate limit as
// StreamFailure's does.
type anthropicStream struct {
	s *anthropic.ChatStream
}

func (b *anthropicStream) Read(p []byte) (int, error) {
	n, err := b.s.Read(p)
	var se *anthropic.StreamError
	if errors.As(err, &se) {
		e := streamError(se.Detail.Type, se.Detail.Message)
		if e == nil {
			e = &Error{Status: anthropic.ErrorStatus(se.Detail.Type)}
		}
		e.Body, e.Err = openaiwire.ErrorJSON(se.Detail.Type, se.Detail.Message, "", ""), se
		err = e
	}
	return n, err
}

func (b *anthropicStream) Close() error { return b.s.Close() }
