package gateway

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/provider"
)

// Call is one decoded model request on its way through the gateway. It
// is held for as long as the request waits, so it keeps what admission,
// the upstream call and the usage record need, not the whole key.
type Call struct {
	// RequestID and ClientRequestID (the client's X-Request-Id, if any)
	// name the request on log lines; RequestID also names its admission
	// requests.
	RequestID, ClientRequestID string
	// Grant is what Prepare decided of it: its model, tenant, priority,
	// deadline and run mode.
	Grant
	// Path is the upstream endpoint under the platform's base URL.
	Path string
	Body Body
	// Stream: the answer is an SSE stream.
	Stream bool
	// Tokens is the estimate reserved against TPM before the upstream
	// says: the prompt's (Wants.PromptTokens) and what the answer may
	// take; MaxTokens is the request's max_tokens, if it set one.
	Tokens, MaxTokens int64
	// Wants is what the request needs of a candidate (the platform
	// models' Supports are checked against it).
	Wants weir.Wants
	// Prompt, if set, counts the prompt in a candidate's encoding
	// (weir.TokenizerOf): the count stands in for Wants.PromptTokens,
	// the estimate, on each candidate whose encoding is known
	// (tokens.go).
	Prompt Prompt
	// Affinity is what the request shares with those whose candidate it
	// prefers, for its model's affinity; "" none.
	Affinity string
	// Header carries client headers worth forwarding upstream.
	Header http.Header
	// Native, if set, is the request as the client sent it in a
	// dialect that some platforms speak themselves (the Responses API,
	// Anthropic's Messages API): a candidate on one of them is sent it
	// instead of Path and Body, and its answer passes back as it came
	// (Head.Native).
	Native *Native

	// Waited is how long the request queued, across its attempts.
	Waited time.Duration
	// Attempts counts the upstream calls made for the request, and
	// Upstream sums their time, each from the request sent to the end of
	// its answer (a stream's last chunk).
	Attempts int
	Upstream time.Duration
	// Usage is the request's usage record: the caller fills in who and
	// what; Serve fills in the platform model, the outcome and the
	// tokens.
	Usage weir.Usage

	// budgets are the budget scopes the admitted attempt's lease
	// reserved its cost in (budgets.go).
	budgets []admission.Need
	// obs is what the current attempt measured (genai.go). It lives in
	// the attempt's lease hold, made once admitted, so that a waiting
	// request holds none of it.
	obs *callObs
}

// NativeAPI names a dialect in front that some platforms speak
// themselves.
type NativeAPI string

const (
	// APIResponses is OpenAI's Responses API
	// (weir.Platform.SpeaksResponses).
	APIResponses NativeAPI = "responses"
	// APIMessages is Anthropic's Messages API
	// (weir.Platform.SpeaksMessages).
	APIMessages NativeAPI = "messages"
)

// Native is a request as the client sent it, in API, for the platforms
// that speak API: it goes to Path under their base URL, its model
// rewritten.
type Native struct {
	API  NativeAPI
	Path string
	Body Body
	// Only, if set, names the parameter that no translation carries:
	// only a candidate that is sent Native can serve the request.
	Only string
	// Platform, if set, is the platform that holds the response the
	// request continues (previous_response_id): only its candidates
	// that are sent Native can serve it.
	Platform string
}

// nativeOnly reports whether only a candidate sent c.Native can serve c.
func (c *Call) nativeOnly() bool {
	return c.Native != nil && (c.Native.Only != "" || c.Native.Platform != "")
}

// Body is a decoded request body.
type Body interface {
	// WithModel is the body with its model replaced by upstream, the
	// platform's name for it.
	WithModel(upstream string) ([]byte, error)
}

// Uploader is a Body sent as a multipart form with files (an image to
// edit, audio to transcribe) rather than JSON. Each attempt opens it
// anew, its model replaced by upstream, and closes it once the call has
// returned; the form's files are the transport's to keep (bounded, on
// disk) until the request ends, so a retry on another candidate sends
// them again. Edge nodes take no uploads: such a request has only the
// catalog's candidates.
type Uploader interface {
	Upload(upstream string) (*provider.Upload, error)
}

// isUpload reports whether c's body is an upload.
func (c *Call) isUpload() bool {
	_, ok := c.Body.(Uploader)
	return ok
}

// logger is c's logger, with its ids on every line.
func (s *Service) logger(c *Call) *slog.Logger {
	if c.ClientRequestID != "" {
		return s.deps.Logger.With(slog.String("request_id", c.RequestID), slog.String("client_request_id", c.ClientRequestID))
	}
	return s.deps.Logger.With(slog.String("request_id", c.RequestID))
}

// Head is how an answer starts: the upstream's status and the headers
// worth passing on.
type Head struct {
	Status                                        int
	ContentType, ContentDisposition, CacheControl string
	// ContentLength is the answer's length; -1: unknown (or not to be
	// declared).
	ContentLength int64
	// Waited is how long the request queued.
	Waited time.Duration
	// Native: the answer is in Call.Native's API, from a platform that
	// speaks it (Platform) and was sent Call.Native, not Chat
	// Completions.
	Native   bool
	Platform string
}

// Answer is where Serve writes an upstream's answer; the transport in
// front implements it (headers, write deadlines, framing an error inside
// a started stream). Writes return the client's error, if it went away or
// stopped reading.
type Answer interface {
	// Start begins the answer. It is called at most once, before any
	// Write.
	Start(Head)
	// Write writes p, as io.Writer's does: it keeps none of p once it
	// returns (the gateway reads answers into buffers it reuses).
	Write(p []byte) (int, error)
	// Flush sends what is buffered.
	Flush() error
	// StreamError ends a started stream with err (an *Error).
	StreamError(err error)
}
