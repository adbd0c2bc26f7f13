package mock

import (
	"bytes"
	"cmp"
	"container/heap"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"math/rand/v2"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weir-gateway/weir/openaiwire"
)

// The video API: OpenAI's asynchronous video generation (POST /v1/videos,
// then GET /v1/videos/{id} until it is done, GET .../content for the file,
// DELETE to cancel or delete).
//
// Jobs are not run by goroutines or timers: a job's end is fixed when it is
// submitted, and every look at the jobs (a submit, a poll, Stats) first
// settles those whose end has passed on the server's clock. So a job's
// state is a function of the clock, exact at every observation, and a test
// with a fake clock moves jobs along without waiting.

const (
	defaultVideoModel   = "sora-2"   // OpenAI's default for this endpoint
	defaultVideoSeconds = "4"        // OpenAI's default clip length
	defaultVideoSize    = "720x1280" // OpenAI's default resolution
	maxVideoSeconds     = 60
	maxIdempotencyKey   = 255
	maxFormField        = 1 << 20 // a multipart field other than a file
)

// Video job states on the wire.
const (
	videoQueued     = openaiwire.VideoQueued
	videoInProgress = openaiwire.VideoInProgress
	videoCompleted  = openaiwire.VideoCompleted
	videoFailed     = openaiwire.VideoFailed
)

// job is one video job. While it runs, status is "" (queued or in progress
// follows from the clock); once it ends, status is completed or failed.
type job struct {
	id      string
	seq     uint64 // creation order
	scope   string // its Idempotency-Key with the caller's credentials; "" without a key
	key     string // the Idempotency-Key as sent
	model   string
	prompt  string
	seconds string
	size    string

	createdAt time.Time
	endAt     time.Time // when it completes or fails
	fail      bool      // ends failed
	expireAt  time.Time // set when it ends: endAt + JobRetention
	status    string
	submits   int64

	index int // in the heap that holds it: running while status is "", else finished
}

// jobHeap orders jobs by a time (endAt or expireAt), then creation.
type jobHeap struct {
	items []*job
	at    func(*job) time.Time
}

func (h *jobHeap) Len() int { return len(h.items) }
func (h *jobHeap) Less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	ta, tb := h.at(a), h.at(b)
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	return a.seq < b.seq
}
func (h *jobHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].index, h.items[j].index = i, j
}
func (h *jobHeap) Push(x any) {
	j := x.(*job)
	j.index = len(h.items)
	h.items = append(h.items, j)
}
func (h *jobHeap) Pop() any {
	n := len(h.items) - 1
	j := h.items[n]
	h.items[n] = nil
	h.items = h.items[:n]
	j.index = -1
	return j
}

// jobStore holds the jobs and their counters, all under mu.
type jobStore struct {
	mu       sync.Mutex
	byID     map[string]*job
	byScope  map[string]*job
	running  jobHeap // by endAt: its length is the jobs running
	finished jobHeap // by expireAt
	seq      uint64
	idRand   rng

	submitted, deduplicated, rejected int64
	completed, failed, cancelled      int64
	polls                             int64
	peak                              int64
}

// newIDLocked returns an unused job id. Ids come from their own sequence,
// seeded at random per server, not from the seeded decisions: two mocks
// (two platforms) never hand out the same id, as real providers do not,
// and the seeded decisions stay the same from run to run.
func (js *jobStore) newIDLocked() string {
	for {
		id := string(js.idRand.appendID([]byte("video_"), 32))
		if js.byID[id] == nil {
			return id
		}
	}
}

func (js *jobStore) init() {
	js.idRand = newRNG(rand.Uint64(), 0)
	js.byID = map[string]*job{}
	js.byScope = map[string]*job{}
	js.running.at = func(j *job) time.Time { return j.endAt }
	js.finished.at = func(j *job) time.Time { return j.expireAt }
}

// settleLocked ends the jobs whose end has passed and forgets the finished
// ones past their retention. Each step pops a heap: O(log n) per job.
func (js *jobStore) settleLocked(now time.Time, retention time.Duration) {
	for len(js.running.items) > 0 && !js.running.items[0].endAt.After(now) {
		j := heap.Pop(&js.running).(*job)
		if j.fail {
			j.status = videoFailed
			js.failed++
		} else {
			j.status = videoCompleted
			js.completed++
		}
		j.expireAt = j.endAt.Add(retention)
		heap.Push(&js.finished, j)
	}
	for len(js.finished.items) > 0 && !js.finished.items[0].expireAt.After(now) {
		js.forgetLocked(heap.Pop(&js.finished).(*job))
	}
}

// forgetLocked drops a job that is in no heap any more.
func (js *jobStore) forgetLocked(j *job) {
	delete(js.byID, j.id)
	if j.scope != "" && js.byScope[j.scope] == j {
		delete(js.byScope, j.scope)
	}
}

// lockAt locks the store and settles it at the server's now, which it
// returns with the settings in force.
func (s *Server) lockAt() (time.Time, *settings) {
	st := s.settings.Load()
	return s.lockWith(st), st
}

// lockWith is lockAt under settings st already loaded: one request
// decides with one version of the settings.
func (s *Server) lockWith(st *settings) time.Time {
	s.jobs.mu.Lock()
	now := s.now()
	s.jobs.settleLocked(now, st.cfg.JobRetention)
	return now
}

// stateAt is a job's status and progress at now.
func (j *job) stateAt(now time.Time) (string, int) {
	switch j.status {
	case videoCompleted:
		return videoCompleted, 100
	case videoFailed:
		return videoFailed, j.progressAt(j.endAt)
	}
	if !now.After(j.createdAt) {
		return videoQueued, 0
	}
	return videoInProgress, j.progressAt(now)
}

// progressAt rises evenly from 0 at submit to 99 just before the end; 100
// is for a completed job only.
func (j *job) progressAt(t time.Time) int {
	total := j.endAt.Sub(j.createdAt)
	if total <= 0 {
		return 0
	}
	p := int(int64(t.Sub(j.createdAt)) * 100 / int64(total))
	return max(0, min(p, 99))
}

// jobFailure is the error object of a failed job.
var jobFailure = openaiwire.VideoError{
	Code:    "video_generation_failed",
	Message: "Video generation failed (a failure drawn by the mock provider's job failure rate).",
}

func (j *job) objectAt(now time.Time) []byte {
	status, progress := j.stateAt(now)
	o := openaiwire.Video{
		ID: j.id, Object: "video", Model: j.model, Status: status, Progress: float64(progress),
		CreatedAt: j.createdAt.Unix(), Prompt: &j.prompt, Seconds: j.seconds, Size: j.size,
	}
	if j.status != "" {
		done, expires := j.endAt.Unix(), j.expireAt.Unix()
		o.CompletedAt, o.ExpiresAt = &done, &expires
	}
	if j.status == videoFailed {
		e := jobFailure
		o.Error = &e
	}
	b, _ := json.Marshal(o) // strings, numbers and pointers to them: cannot fail
	return append(b, '\n')
}

// videoRequest is a submit's fields, from JSON or a multipart form.
type videoRequest struct {
	model, prompt, seconds, size string
}

// submitVideo serves POST /v1/videos: JSON, or multipart/form-data as the
// SDKs send when there is an input_reference file (accepted and ignored).
func (s *Server) submitVideo(c *call) int {
	req, apiErr := parseVideoRequest(c.r.Header.Get("Content-Type"), c.body)
	if apiErr != nil {
		return c.fail(*apiErr)
	}
	o, err := parseOverrides(c.r.Header)
	if err != nil {
		return c.fail(invalidRequest("", err.Error()))
	}
	key := c.r.Header.Get("Idempotency-Key")
	if len(key) > maxIdempotencyKey {
		return c.fail(invalidRequest("", fmt.Sprintf("The Idempotency-Key header is longer than %d characters.", maxIdempotencyKey)))
	}
	if status := s.begin(c, req.model, o); status != 0 {
		return status
	}
	cfg := &c.st.cfg
	fail := o.jobFail > 0 || (o.jobFail == 0 && c.rand.chance(cfg.JobFailureRate))
	d := cfg.JobDuration
	if o.jobDuration >= 0 {
		d = o.jobDuration
	}
	// Keys are scoped to the caller's credentials, as a real provider's
	// are to an account: two platforms on one mock do not share keys.
	var scope string
	if key != "" {
		scope = c.r.Header.Get("Authorization") + "\x00" + key
	}

	js := &s.jobs
	st := c.st
	now := s.lockWith(st)
	if j := js.byScope[scope]; scope != "" && j != nil {
		if j.model != req.model || j.prompt != req.prompt || j.seconds != req.seconds || j.size != req.size {
			js.mu.Unlock()
			return c.fail(apiError{Status: http.StatusConflict, Type: "invalid_request_error", Code: "idempotency_key_reused",
				Message: "This Idempotency-Key was already used with different parameters."})
		}
		j.submits++
		js.deduplicated++
		body := j.objectAt(now)
		js.mu.Unlock()
		c.w.Header().Set("Idempotent-Replayed", "true")
		writeJSON(c.w, body)
		return http.StatusOK
	}
	if limit := st.cfg.MaxJobs; limit > 0 && len(js.running.items) >= limit {
		js.rejected++
		js.mu.Unlock()
		return c.fail(jobCapError(limit))
	}
	js.seq++
	id := js.newIDLocked()
	j := &job{
		id: id, seq: js.seq, scope: scope, key: key,
		model: req.model, prompt: req.prompt, seconds: req.seconds, size: req.size,
		createdAt: now, endAt: now.Add(d), fail: fail, submits: 1,
	}
	js.byID[id] = j
	if scope != "" {
		js.byScope[scope] = j
	}
	heap.Push(&js.running, j)
	js.submitted++
	js.peak = max(js.peak, int64(len(js.running.items)))
	js.settleLocked(now, st.cfg.JobRetention) // a job of no duration is done at once
	body := j.objectAt(now)
	js.mu.Unlock()
	writeJSON(c.w, body)
	return http.StatusOK
}

// jobCapError is the answer past MaxJobs.
func jobCapError(limit int) apiError {
	return apiError{
		Status:  http.StatusTooManyRequests,
		Type:    "requests",
		Code:    "rate_limit_exceeded",
		Message: "Rate limit reached: the mock provider is running its limit of " + strconv.Itoa(limit) + " concurrent video jobs. Please try again later.",
	}
}

func parseVideoRequest(contentType string, body []byte) (videoRequest, *apiError) {
	var req videoRequest
	fail := func(param, msg string) (videoRequest, *apiError) {
		e := invalidRequest(param, msg)
		return req, &e
	}
	mt, params, _ := mime.ParseMediaType(contentType)
	switch mt {
	case "multipart/form-data":
		fields, err := readMultipart(body, params["boundary"])
		if err != nil {
			return fail("", "We could not parse the multipart body of your request: "+err.Error())
		}
		req = videoRequest{model: fields["model"], prompt: fields["prompt"], seconds: fields["seconds"], size: fields["size"]}
	default:
		// JSON whatever the Content-Type says, as the other endpoints
		// read it (curl -d sends a form type over a JSON body).
		var js struct {
			Model   string          `json:"model"`
			Prompt  string          `json:"prompt"`
			Seconds json.RawMessage `json:"seconds"`
			Size    string          `json:"size"`
		}
		if err := json.Unmarshal(body, &js); err != nil {
			return fail("", "We could not parse the JSON body of your request: "+err.Error())
		}
		req = videoRequest{model: js.Model, prompt: js.Prompt, size: js.Size}
		// OpenAI types seconds as a string ("8"); a number is taken too.
		if raw := bytes.TrimSpace(js.Seconds); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
			if raw[0] == '"' {
				if err := json.Unmarshal(raw, &req.seconds); err != nil {
					return fail("seconds", "Invalid 'seconds': "+err.Error())
				}
			} else {
				req.seconds = string(raw)
			}
		}
	}
	if strings.TrimSpace(req.prompt) == "" {
		return fail("prompt", "'prompt' is required.")
	}
	if req.model == "" {
		req.model = defaultVideoModel
	}
	if req.seconds == "" {
		req.seconds = defaultVideoSeconds
	}
	if n, err := strconv.Atoi(req.seconds); err != nil || n < 1 || n > maxVideoSeconds {
		return fail("seconds", fmt.Sprintf("Invalid 'seconds': %q is not a whole number of seconds from 1 to %d.", req.seconds, maxVideoSeconds))
	}
	if req.size == "" {
		req.size = defaultVideoSize
	}
	if !validSize(req.size) {
		return fail("size", fmt.Sprintf("Invalid 'size': %q is not WIDTHxHEIGHT, such as 1280x720.", req.size))
	}
	return req, nil
}

// readMultipart returns a form's fields; file parts (input_reference) are
// read past.
func readMultipart(body []byte, boundary string) (map[string]string, error) {
	if boundary == "" {
		return nil, errors.New("no boundary in Content-Type")
	}
	fields := map[string]string{}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return fields, nil
		}
		if err != nil {
			return nil, err
		}
		if p.FileName() != "" {
			if _, err := io.Copy(io.Discard, p); err != nil {
				return nil, err
			}
			continue
		}
		v, err := io.ReadAll(io.LimitReader(p, maxFormField+1))
		if err != nil {
			return nil, err
		}
		if len(v) > maxFormField {
			return nil, fmt.Errorf("field %q is longer than %d bytes", p.FormName(), maxFormField)
		}
		fields[p.FormName()] = string(v)
	}
}

func validSize(s string) bool {
	w, h, ok := strings.Cut(s, "x")
	for _, n := range []string{w, h} {
		if v, err := strconv.Atoi(n); !ok || err != nil || v < 1 || v > 8192 || n[0] == '+' {
			return false
		}
	}
	return true
}

// serveVideo serves /v1/videos/{id} (GET, DELETE) and
// /v1/videos/{id}/content (GET). It reports false for another path under
// /v1/videos/, which is the caller's to answer 404.
func (s *Server) serveVideo(w http.ResponseWriter, r *http.Request, rest string) bool {
	id, content := strings.CutSuffix(rest, "/content")
	if id == "" || strings.Contains(id, "/") {
		return false
	}
	if content {
		if !onlyMethod(w, r, http.MethodGet) {
			return true
		}
	} else if !onlyMethod(w, r, http.MethodGet, http.MethodDelete) {
		return true
	}
	o, err := parseOverrides(r.Header)
	if err != nil {
		writeError(w, invalidRequest("", err.Error()), 0)
		return true
	}
	st := s.settings.Load()
	if o.status != 0 {
		writeError(w, statusError(o.status), st.cfg.RetryAfter)
		return true
	}
	switch {
	case content:
		s.videoContent(w, r, id)
	case r.Method == http.MethodGet:
		s.getVideo(w, id)
	default:
		s.deleteVideo(w, id)
	}
	return true
}

func videoNotFound(id string) apiError {
	return apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "video_not_found",
		Message: fmt.Sprintf("Video with id '%s' not found.", id)}
}

// getVideo serves GET /v1/videos/{id}.
func (s *Server) getVideo(w http.ResponseWriter, id string) {
	now, _ := s.lockAt()
	j := s.jobs.byID[id]
	var body []byte
	if j != nil {
		s.jobs.polls++
		body = j.objectAt(now)
	}
	s.jobs.mu.Unlock()
	if j == nil {
		writeError(w, videoNotFound(id), 0)
		return
	}
	writeJSON(w, body)
}

// deleteVideo serves DELETE /v1/videos/{id}: a running job is cancelled
// (and its slot under MaxJobs freed), a finished one deleted; either way
// the job and its Idempotency-Key are forgotten.
func (s *Server) deleteVideo(w http.ResponseWriter, id string) {
	s.lockAt()
	js := &s.jobs
	j := js.byID[id]
	if j != nil {
		if j.status == "" {
			heap.Remove(&js.running, j.index)
			js.cancelled++
		} else {
			heap.Remove(&js.finished, j.index)
		}
		js.forgetLocked(j)
	}
	js.mu.Unlock()
	if j == nil {
		writeError(w, videoNotFound(id), 0)
		return
	}
	b := append([]byte(`{"id":`), appendJSONString(nil, id)...)
	writeJSON(w, append(b, `,"object":"video.deleted","deleted":true}`+"\n"...))
}

// videoContent serves GET /v1/videos/{id}/content: variant video (the
// default) is mockMP4, thumbnail mockWebP and spritesheet mockJPEG, with
// the types OpenAI serves them with. Ranges are served as
// http.ServeContent serves them.
func (s *Server) videoContent(w http.ResponseWriter, r *http.Request, id string) {
	variant := r.URL.Query().Get("variant")
	switch variant {
	case "", "video", "thumbnail", "spritesheet":
	default:
		writeError(w, invalidRequest("variant", fmt.Sprintf("Invalid 'variant': %q is not one of video, thumbnail, spritesheet.", variant)), 0)
		return
	}
	now, _ := s.lockAt()
	j := s.jobs.byID[id]
	var status string
	var modTime time.Time
	if j != nil {
		status, _ = j.stateAt(now)
		modTime = j.endAt
	}
	s.jobs.mu.Unlock()
	switch {
	case j == nil:
		writeError(w, videoNotFound(id), 0)
		return
	case status != videoCompleted:
		writeError(w, apiError{Status: http.StatusConflict, Type: "invalid_request_error", Code: "video_not_ready",
			Message: fmt.Sprintf("Video '%s' has no content: its status is %s.", id, status)}, 0)
		return
	}
	body, ctype, name := mockMP4, "video/mp4", "video.mp4"
	switch variant {
	case "thumbnail":
		body, ctype, name = mockWebP, "image/webp", "thumbnail.webp"
	case "spritesheet":
		body, ctype, name = mockJPEG, "image/jpeg", "spritesheet.jpg"
	}
	w.Header().Set("Content-Type", ctype)
	http.ServeContent(w, r, name, modTime, bytes.NewReader(body))
}

// mockMP4 is a placeholder MP4: an ftyp box, a free box and an mdat box of
// zeros. It has the signature and the box structure a sniffer or a
// download check looks for; it is not a playable video.
var mockMP4 = func() []byte {
	box := func(typ string, payload []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(8+len(payload)))
		return append(append(b, typ...), payload...)
	}
	ftyp := []byte("isom")
	ftyp = binary.BigEndian.AppendUint32(ftyp, 0x200)
	ftyp = append(ftyp, "isomiso2avc1mp41"...)
	out := box("ftyp", ftyp)
	out = append(out, box("free", nil)...)
	return append(out, box("mdat", make([]byte, 1024))...)
}()

// mockWebP is the thumbnail: a 1x1 lossless WebP (a RIFF container with
// one VP8L chunk), the smallest image a WebP decoder accepts.
var mockWebP = []byte("RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00\x2f\x00\x00\x00\x10\x07\x10\x11\x11\x88\x88\xfe\x07\x00")

// mockJPEG is the spritesheet: a 4x4 grid of 32x18 frames in grey
// levels, as a baseline JPEG.
var mockJPEG = func() []byte {
	img := image.NewGray(image.Rect(0, 0, 4*32, 4*18))
	for y := range img.Rect.Dy() {
		for x := range img.Rect.Dx() {
			frame := (y/18)*4 + x/32
			img.SetGray(x, y, color.Gray{Y: uint8(frame * 16)})
		}
	}
	var b bytes.Buffer
	_ = jpeg.Encode(&b, img, &jpeg.Options{Quality: 50}) // into memory: cannot fail
	return b.Bytes()
}()

// JobInfo is one held video job, as GET /mock/jobs and Jobs report it.
type JobInfo struct {
	ID             string `json:"id"`
	IdempotencyKey string `json:"idempotency_key"`
	Model          string `json:"model"`
	Prompt         string `json:"prompt"`
	Seconds        string `json:"seconds"`
	Size           string `json:"size"`
	// Status is queued, in_progress, completed or failed.
	Status   string `json:"status"`
	Progress int    `json:"progress"`
	// Submits is the submits answered with this job (1 plus the
	// resubmits deduplicated by its Idempotency-Key).
	Submits   int64     `json:"submits"`
	CreatedAt time.Time `json:"created_at"`
	// EndsAt is when it completes or fails (or did).
	EndsAt time.Time `json:"ends_at"`
}

type jobList struct {
	Object string    `json:"object"`
	Data   []JobInfo `json:"data"`
}

// Jobs returns the jobs held now (running, or finished within their
// retention), oldest first.
func (s *Server) Jobs() []JobInfo {
	now, _ := s.lockAt()
	defer s.jobs.mu.Unlock()
	held := make([]*job, 0, len(s.jobs.byID))
	for _, j := range s.jobs.byID {
		held = append(held, j)
	}
	slices.SortFunc(held, func(a, b *job) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]JobInfo, len(held))
	for i, j := range held {
		status, progress := j.stateAt(now)
		out[i] = JobInfo{
			ID: j.id, IdempotencyKey: j.key, Model: j.model, Prompt: j.prompt, Seconds: j.seconds, Size: j.size,
			Status: status, Progress: progress, Submits: j.submits, CreatedAt: j.createdAt, EndsAt: j.endAt,
		}
	}
	return out
}

// jobStats fills the job counters of st.
func (s *Server) jobStats(st *Stats) {
	_, set := s.lockAt()
	defer s.jobs.mu.Unlock()
	js := &s.jobs
	st.MaxJobs = set.cfg.MaxJobs
	st.JobsSubmitted, st.JobsDeduplicated, st.JobsRejected = js.submitted, js.deduplicated, js.rejected
	st.JobsRunning, st.PeakJobsRunning = int64(len(js.running.items)), js.peak
	st.JobsCompleted, st.JobsFailed, st.JobsCancelled = js.completed, js.failed, js.cancelled
	st.JobPolls = js.polls
	st.JobSubmits = make(map[string]int64, len(js.byID))
	for id, j := range js.byID {
		st.JobSubmits[id] = j.submits
	}
}

func (s *Server) resetJobStats() {
	s.lockAt()
	defer s.jobs.mu.Unlock()
	js := &s.jobs
	js.submitted, js.deduplicated, js.rejected = 0, 0, 0
	js.completed, js.failed, js.cancelled, js.polls = 0, 0, 0, 0
	js.peak = int64(len(js.running.items))
}
