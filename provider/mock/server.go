package mock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Server is the mock provider. It is an http.Handler; its Config can be
// changed while it serves (Update, POST /mock/config).
type Server struct {
	settings atomic.Pointer[settings]
	updateMu sync.Mutex // serializes read-modify-write of settings

	arrivals atomic.Uint64 // numbers work requests for their random sequence
	inFlight atomic.Int64
	peak     atomic.Int64
	rejected atomic.Int64
	stalled  atomic.Int64
	byStatus [600]atomic.Int64

	jobs      jobStore      // the video jobs
	responses responseStore // the responses kept
	traced    tracedLog     // the requests that came with a traceparent

	now     func() time.Time
	maxBody int64 // maxBody, but smaller in tests
	hooks   testHooks
}

// testHooks let the package's tests wait on events instead of sleeping.
// They are set before the server serves and never changed after.
type testHooks struct {
	waiting  func() // a work request holds its slot and begins its latency
	stalling func() // a stream has flushed its first half and stalls
	done     func(status int)
}

var _ http.Handler = (*Server)(nil)

// settings is one immutable snapshot of the Config with what is derived
// from it, swapped whole on update.
type settings struct {
	cfg      Config
	models   map[string]bool // nil: any model is accepted
	listJSON []byte          // GET /v1/models
	capBody  []byte          // the 429 past MaxConcurrent
	interval time.Duration   // between streamed tokens; 0: unpaced
}

func newSettings(cfg Config) *settings {
	st := &settings{cfg: cfg}
	names := cfg.Models
	if len(names) > 0 {
		st.models = make(map[string]bool, len(names))
		for _, m := range names {
			st.models[m] = true
		}
	} else {
		names = DefaultModels
	}
	st.listJSON = modelList(names)
	st.capBody = capError(cfg.MaxConcurrent).body()
	if cfg.TokensPerSecond > 0 {
		st.interval = time.Duration(float64(time.Second) / cfg.TokensPerSecond)
	}
	return st
}

// New returns a mock provider behaving as cfg says, its zero fields set to
// their defaults. It panics if cfg.Validate fails: a Config is code, not
// input (the command validates its flags first).
func New(cfg Config) *Server {
	return NewWithClock(cfg, time.Now)
}

// NewWithClock is New with the time source the video jobs and timestamps
// read: a test passes a fake clock's Now and moves jobs along by moving
// the clock, with no waiting. Latency, pacing and stalls still wait on
// real timers.
func NewWithClock(cfg Config, now func() time.Time) *Server {
	if err := cfg.Validate(); err != nil {
		panic(fmt.Sprintf("mock.New: %v", err))
	}
	s := &Server{now: now, maxBody: maxBody}
	s.jobs.init()
	s.settings.Store(newSettings(cfg.withDefaults()))
	return s
}

// Config returns the configuration in force, defaults filled in.
func (s *Server) Config() Config {
	c := s.settings.Load().cfg
	c.Models = append([]string(nil), c.Models...)
	return c
}

// Update changes the configuration: f edits a copy of the one in force,
// which replaces it if it validates. Requests already past a decision keep
// it (a lowered cap takes no slot back; it only turns new requests away
// until in-flight work is below it).
func (s *Server) Update(f func(*Config)) error {
	s.updateMu.Lock()
	defer s.updateMu.Unlock()
	c := s.Config()
	f(&c)
	if err := c.Validate(); err != nil {
		return err
	}
	s.settings.Store(newSettings(c.withDefaults()))
	return nil
}

// Stats are the counters since New or the last ResetStats.
type Stats struct {
	// InFlight is the work requests holding a slot now.
	InFlight int64 `json:"in_flight"`
	// PeakInFlight is the most held at once.
	PeakInFlight int64 `json:"peak_in_flight"`
	// MaxConcurrent is the cap in force (0: unlimited).
	MaxConcurrent int `json:"max_concurrent"`
	// Requests is the work requests finished, rejected ones included.
	Requests int64 `json:"requests"`
	// ByStatus counts finished work requests by the status answered; 499
	// is a client that went away first.
	ByStatus map[int]int64 `json:"by_status"`
	// Rejected is the 429s answered because the cap was full.
	Rejected int64 `json:"rejected"`
	// Stalled is the streams that stalled.
	Stalled int64 `json:"stalled"`

	// The video jobs (POST /v1/videos and what follows).

	// MaxJobs is the job cap in force (0: unlimited).
	MaxJobs int `json:"max_jobs"`
	// JobsSubmitted is the submits that started a new job.
	JobsSubmitted int64 `json:"jobs_submitted"`
	// JobsDeduplicated is the submits answered with the job their
	// Idempotency-Key already named, starting nothing.
	JobsDeduplicated int64 `json:"jobs_deduplicated"`
	// JobsRejected is the submits answered 429 because MaxJobs were
	// running.
	JobsRejected int64 `json:"jobs_rejected"`
	// JobsRunning is the jobs queued or in progress now.
	JobsRunning int64 `json:"jobs_running"`
	// PeakJobsRunning is the most running at once.
	PeakJobsRunning int64 `json:"peak_jobs_running"`
	// JobsCompleted, JobsFailed and JobsCancelled count jobs by how they
	// ended; cancelled is deleted while queued or in progress.
	JobsCompleted int64 `json:"jobs_completed"`
	JobsFailed    int64 `json:"jobs_failed"`
	JobsCancelled int64 `json:"jobs_cancelled"`
	// JobPolls is the GET /v1/videos/{id} answered.
	JobPolls int64 `json:"job_polls"`
	// JobSubmits maps every job still held (not deleted, not past its
	// retention) to the submits answered with it: 1, plus one for each
	// resubmit deduplicated by its Idempotency-Key. ResetStats leaves it:
	// the counts belong to the jobs.
	JobSubmits map[string]int64 `json:"job_submits"`
}

// Stats returns the counters. Each is read atomically; together they are
// a near-instant picture, exact once the server is idle.
func (s *Server) Stats() Stats {
	st := Stats{
		InFlight:      s.inFlight.Load(),
		PeakInFlight:  s.peak.Load(),
		MaxConcurrent: s.settings.Load().cfg.MaxConcurrent,
		Rejected:      s.rejected.Load(),
		Stalled:       s.stalled.Load(),
		ByStatus:      map[int]int64{},
	}
	for code := range s.byStatus {
		if n := s.byStatus[code].Load(); n != 0 {
			st.ByStatus[code] = n
			st.Requests += n
		}
	}
	s.jobStats(&st)
	return st
}

// ResetStats zeroes the counters; the peak restarts from what is in flight.
func (s *Server) ResetStats() {
	for code := range s.byStatus {
		s.byStatus[code].Store(0)
	}
	s.rejected.Store(0)
	s.stalled.Store(0)
	s.peak.Store(s.inFlight.Load())
	s.resetJobStats()
}

// acquire takes a slot unless limit (>0) are taken. The compare-and-swap
// makes the cap exact: in-flight never passes limit, even for an instant.
func (s *Server) acquire(limit int) bool {
	for {
		cur := s.inFlight.Load()
		if limit > 0 && cur >= int64(limit) {
			return false
		}
		if s.inFlight.CompareAndSwap(cur, cur+1) {
			for {
				p := s.peak.Load()
				if cur+1 <= p || s.peak.CompareAndSwap(p, cur+1) {
					return true
				}
			}
		}
	}
}

func (s *Server) finish(status int) {
	if status > 0 && status < len(s.byStatus) {
		s.byStatus[status].Add(1)
	}
	if s.hooks.done != nil {
		s.hooks.done(status)
	}
}

// statusClientClosed counts a request whose client left before its answer
// was complete.
const statusClientClosed = 499

// ServeHTTP routes one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.traced.note(r)
	switch p := r.URL.Path; p {
	case "/v1/chat/completions":
		s.work(w, r, s.chat)
	case "/v1/embeddings":
		s.work(w, r, s.embeddings)
	case "/v1/images/generations":
		s.work(w, r, s.images)
	case "/v1/audio/speech":
		s.work(w, r, s.speech)
	case "/v1/images/edits":
		s.work(w, r, s.imageEdits)
	case "/v1/images/variations":
		s.work(w, r, s.imageVariations)
	case "/v1/audio/transcriptions":
		s.work(w, r, s.transcriptions)
	case "/v1/audio/translations":
		s.work(w, r, s.translations)
	case "/v1/videos":
		s.work(w, r, s.submitVideo)
	case "/v1/responses":
		s.work(w, r, s.createResponse)
	case "/v1/messages":
		s.workAs(w, r, shapeAnthropic, s.messages)
	case "/v1/messages/count_tokens":
		s.workAs(w, r, shapeAnthropic, s.countTokens)
	case "/v1/models":
		if onlyMethod(w, r, http.MethodGet) {
			writeJSON(w, s.settings.Load().listJSON)
		}
	case "/mock/config":
		s.serveConfig(w, r)
	case "/mock/stats":
		if onlyMethod(w, r, http.MethodGet) {
			b, _ := json.Marshal(s.Stats()) // ints in a map: cannot fail
			writeJSON(w, append(b, '\n'))
		}
	case "/mock/jobs":
		if onlyMethod(w, r, http.MethodGet) {
			b, _ := json.Marshal(jobList{Object: "list", Data: s.Jobs()}) // plain values: cannot fail
			writeJSON(w, append(b, '\n'))
		}
	case "/mock/traces":
		s.serveTraced(w, r)
	case "/mock/stats/reset":
		if onlyMethod(w, r, http.MethodPost) {
			s.ResetStats()
			w.WriteHeader(http.StatusNoContent)
		}
	case imagePath:
		if onlyMethod(w, r, http.MethodGet) {
			w.Header().Set("Content-Type", "image/png")
			w.Write(mockPNG)
		}
	default:
		if model, method, ok := geminiRoute(p); ok {
			s.serveGemini(w, r, model, method)
			return
		}
		if rest, ok := strings.CutPrefix(p, "/v1/responses/"); ok {
			s.serveStoredResponse(w, r, rest)
			return
		}
		if rest, ok := strings.CutPrefix(p, azureV1); ok {
			s.serveAzureV1(w, r, rest)
			return
		}
		if deployment, endpoint, ok := azureRoute(p); ok {
			s.serveAzure(w, r, deployment, endpoint)
			return
		}
		if strings.HasPrefix(p, "/model/") || strings.HasPrefix(p, "/v1/model/") {
			s.serveConverse(w, r)
			return
		}
		if id, ok := strings.CutPrefix(p, "/v1/models/"); ok {
			if onlyMethod(w, r, http.MethodGet) {
				s.model(w, id)
			}
			return
		}
		if rest, ok := strings.CutPrefix(p, "/v1/videos/"); ok && s.serveVideo(w, r, rest) {
			return
		}
		writeError(w, apiError{Status: http.StatusNotFound, Type: "invalid_request_error",
			Message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, p)}, 0)
	}
}

// onlyMethod answers 405, with Allow, unless r uses one of methods.
func onlyMethod(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	if slices.Contains(methods, r.Method) {
		return true
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	writeError(w, apiError{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error",
		Message: fmt.Sprintf("Invalid method for URL (%s %s): use %s", r.Method, r.URL.Path, strings.Join(methods, " or "))}, 0)
	return false
}

func writeJSON(w http.ResponseWriter, body []byte) {
	w.Header()["Content-Type"] = jsonContentType
	w.Write(body)
}

// call is one work request on its way through a handler.
type call struct {
	w    http.ResponseWriter
	r    *http.Request
	st   *settings
	rand rng
	body []byte
	// shape is how its errors are written.
	shape errorShape
	now   func() time.Time
}

// errorShape is a protocol's error body: OpenAI's, Gemini's,
// Anthropic's or Bedrock's.
type errorShape int

const (
	shapeOpenAI errorShape = iota
	shapeGemini
	shapeAnthropic
	shapeBedrock
)

// A handler serves one decoded work request and returns the status it
// answered (statusClientClosed if the client left first).
type handler func(c *call) int

// maxBody bounds a request body; past it the answer is 413.
const maxBody = 8 << 20

var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// work runs h under the concurrency cap and counts its outcome.
func (s *Server) work(w http.ResponseWriter, r *http.Request, h handler) {
	s.workAs(w, r, shapeOpenAI, h)
}

// workAs is work for a protocol whose errors have the given shape.
func (s *Server) workAs(w http.ResponseWriter, r *http.Request, shape errorShape, h handler) {
	if !onlyMethod(w, r, http.MethodPost) {
		return
	}
	st := s.settings.Load()
	if !s.acquire(st.cfg.MaxConcurrent) {
		s.rejected.Add(1)
		switch shape {
		case shapeGemini:
			writeGeminiError(w, capError(st.cfg.MaxConcurrent), st.cfg.RetryAfter)
		case shapeAnthropic:
			writeAnthropicError(w, capError(st.cfg.MaxConcurrent), st.cfg.RetryAfter, s.now())
		case shapeBedrock:
			writeBedrockError(w, capError(st.cfg.MaxConcurrent))
		default:
			writeErrorBody(w, http.StatusTooManyRequests, st.capBody, st.cfg.RetryAfter)
		}
		s.finish(http.StatusTooManyRequests)
		return
	}
	status := statusClientClosed
	defer func() {
		s.inFlight.Add(-1)
		s.finish(status)
	}()

	buf := bodyPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= 1<<20 { // keep the pool from holding large bodies
			bodyPool.Put(buf)
		}
	}()
	c := &call{w: w, r: r, st: st, rand: newRNG(st.cfg.Seed, s.arrivals.Add(1)), shape: shape, now: s.now}
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, s.maxBody)); err != nil {
		if r.Context().Err() != nil {
			return
		}
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			status = c.fail(apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error",
				Message: fmt.Sprintf("The request body is larger than %d bytes.", s.maxBody)})
			return
		}
		status = c.fail(invalidRequest("", "Could not read the request body: "+err.Error()))
		return
	}
	c.body = buf.Bytes()
	w.Header()["X-Request-Id"] = []string{string(c.rand.appendID([]byte("req_"), 24))}
	status = h(c)
}

// overrides are the X-Mock-* headers of one request.
type overrides struct {
	status   int           // 0: none
	latency  time.Duration // <0: none
	stall    int8          // -1 never, 0 as StallRate says, 1 stall
	stallFor time.Duration
	tokens   int // 0: none
	// streamError ends a Messages or Responses stream after half its
	// tokens with an error of this type (Messages) or code (Responses);
	// "": none.
	streamError string
	usage       usageReport

	jobDuration time.Duration // <0: none
	jobFail     int8          // -1 never, 0 as JobFailureRate says, 1 fail
}

func parseOverrides(h http.Header) (overrides, error) {
	o := overrides{latency: -1, jobDuration: -1, usage: noUsageReport}
	if len(h) == 0 {
		return o, nil
	}
	if v := h.Get("X-Mock-Status"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 400 || n > 599 {
			return o, fmt.Errorf("X-Mock-Status must be an HTTP status from 400 to 599, not %q", v)
		}
		o.status = n
	}
	if v := h.Get("X-Mock-Latency"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return o, fmt.Errorf("X-Mock-Latency must be a duration such as 250ms, not %q", v)
		}
		o.latency = d
	}
	if v := h.Get("X-Mock-Stall"); v != "" {
		switch v {
		case "1", "true":
			o.stall = 1
		case "0", "false":
			o.stall = -1
		default:
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return o, fmt.Errorf("X-Mock-Stall must be 1, 0 or a duration such as 2s, not %q", v)
			}
			o.stall, o.stallFor = 1, d
		}
	}
	if v := h.Get("X-Mock-Tokens"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxTokens {
			return o, fmt.Errorf("X-Mock-Tokens must be a number from 1 to %d, not %q", maxTokens, v)
		}
		o.tokens = n
	}
	if v := h.Get("X-Mock-Stream-Error"); v != "" {
		if !isErrorName(v) {
			return o, fmt.Errorf("X-Mock-Stream-Error must name an error type or code such as overloaded_error or rate_limit_exceeded, not %q", v)
		}
		o.streamError = v
	}
	if v := h.Get("X-Mock-Usage"); v != "" {
		u, err := parseUsageReport(v)
		if err != nil {
			return o, err
		}
		o.usage = u
	}
	if v := h.Get("X-Mock-Job-Duration"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return o, fmt.Errorf("X-Mock-Job-Duration must be a duration such as 30s, not %q", v)
		}
		o.jobDuration = d
	}
	if v := h.Get("X-Mock-Job-Fail"); v != "" {
		switch v {
		case "1", "true":
			o.jobFail = 1
		case "0", "false":
			o.jobFail = -1
		default:
			return o, fmt.Errorf("X-Mock-Job-Fail must be 1 or 0, not %q", v)
		}
	}
	return o, nil
}

// isErrorName reports whether v looks like an API's error type or code:
// lower-case letters and underscores, at most 64.
func isErrorName(v string) bool {
	if len(v) > 64 {
		return false
	}
	for _, r := range v {
		if (r < 'a' || r > 'z') && r != '_' {
			return false
		}
	}
	return true
}

// begin does what every work request does after decoding its body: checks
// the model, waits its latency, and answers a forced or drawn error. It
// returns the status already answered, or 0 to go on.
func (s *Server) begin(c *call, model string, o overrides) int {
	if model == "" {
		return c.fail(invalidRequest("model", "you must provide a model parameter"))
	}
	if c.st.models != nil && !c.st.models[model] {
		return c.fail(apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "model_not_found",
			Message: fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", model)})
	}
	cfg := &c.st.cfg
	latency := o.latency
	if latency < 0 {
		latency = cfg.sampleLatency(&c.rand)
	}
	failWith := o.status
	if failWith == 0 && c.rand.chance(cfg.ErrorRate) {
		failWith = http.StatusInternalServerError
	}
	if s.hooks.waiting != nil {
		s.hooks.waiting()
	}
	if !wait(c.r.Context(), latency) {
		return statusClientClosed
	}
	if failWith != 0 {
		return c.fail(statusError(failWith))
	}
	return 0
}

func (c *call) fail(e apiError) int {
	switch c.shape {
	case shapeGemini:
		writeGeminiError(c.w, e, c.st.cfg.RetryAfter)
	case shapeAnthropic:
		writeAnthropicError(c.w, e, c.st.cfg.RetryAfter, c.now())
	case shapeBedrock:
		writeBedrockError(c.w, e) // Bedrock sends no Retry-After
	default:
		writeError(c.w, e, c.st.cfg.RetryAfter)
	}
	return e.Status
}

// wait waits d or until ctx ends, and reports whether d passed.
func wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *Server) serveConfig(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
	case http.MethodPost:
		var p configPatch
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			writeError(w, invalidRequest("", "Invalid mock config: "+err.Error()), 0)
			return
		}
		if err := s.Update(p.apply); err != nil {
			writeError(w, invalidRequest("", "Invalid mock config: "+err.Error()), 0)
			return
		}
	default:
		onlyMethod(w, r, http.MethodPost)
		return
	}
	b, _ := json.Marshal(s.Config().toJSON()) // plain values: cannot fail
	writeJSON(w, append(b, '\n'))
}
