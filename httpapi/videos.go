package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/openaiwire"
)

// What OpenAI's video API makes when a request leaves seconds or size out.
const (
	openAIVideoSeconds = "4"
	openAIVideoSize    = "720x1280"
)

// videoObject is OpenAI's video object as Weir answers with it, and where
// the task stands in Weir's queue. Its id is the task's, not the upstream
// job's (the client never sees those), and its other fields are what the
// client asked for until the upstream says what it made.
// remixed_from_video_id is always null: Weir has no remix endpoint.
type videoObject struct {
	openaiwire.Video
	Weir taskQueueDetail `json:"weir"`
}

// videoFields are the fields of a video request, or of the upstream's
// video object, that the video object repeats.
type videoFields struct {
	Prompt    *string         `json:"prompt"`
	Seconds   json.RawMessage `json:"seconds"`
	Size      string          `json:"size"`
	ExpiresAt *int64          `json:"expires_at"`
}

// seconds is Seconds as OpenAI types it, a string, whether it came as
// one ("8") or as a number (8).
func (f videoFields) seconds() string {
	var s string
	if json.Unmarshal(f.Seconds, &s) == nil {
		return s
	}
	if n := strings.TrimSpace(string(f.Seconds)); n != "null" {
		return n
	}
	return ""
}

func openAIVideoStatus(st weir.TaskStatus) string {
	switch st {
	case weir.TaskQueued:
		return openaiwire.VideoQueued
	case weir.TaskAdmitted, weir.TaskRunning:
		return openaiwire.VideoInProgress
	case weir.TaskSucceeded:
		return openaiwire.VideoCompleted
	default:
		return openaiwire.VideoFailed
	}
}

func (s *Server) videoOf(ctx context.Context, t weir.Task) videoObject {
	v := videoObject{
		Video: openaiwire.Video{ID: t.ID, Object: "video", Model: t.Model, Status: openAIVideoStatus(t.Status),
			Progress: float64(t.Progress), CreatedAt: t.CreatedAt.Unix()},
		Weir: taskQueueDetail{Status: t.Status, RunMode: t.RunMode, RunID: t.RunID},
	}
	// What the client asked for, or OpenAI's defaults for what it did
	// not, until the upstream says what it made (its object is the task's
	// result once finished) and when the assets expire.
	v.Seconds, v.Size = openAIVideoSeconds, openAIVideoSize
	var in videoFields
	if json.Unmarshal(t.Input, &in) == nil {
		v.Prompt = in.Prompt
		if s := in.seconds(); s != "" {
			v.Seconds = s
		}
		if in.Size != "" {
			v.Size = in.Size
		}
	}
	var up videoFields
	if len(t.Result) > 0 && json.Unmarshal(t.Result, &up) == nil {
		if s := up.seconds(); s != "" {
			v.Seconds = s
		}
		if up.Size != "" {
			v.Size = up.Size
		}
		if v.Prompt == nil {
			v.Prompt = up.Prompt
		}
		v.ExpiresAt = up.ExpiresAt
	}
	v.CompletedAt = finishedAt(t)
	if e := errorOf(t); e != nil {
		v.Error = &openaiwire.VideoError{Code: e.Code, Message: e.Message}
	}
	if q := s.queueOf(ctx, t); q != nil {
		v.Weir.QueuePosition, v.Weir.EstimatedWait = &q.Position, &q.EstimatedWait
	}
	return v
}

// createVideo is POST /v1/videos. Like every endpoint, it authenticates
// from the headers before it reads the body.
func (s *Server) createVideo(w http.ResponseWriter, r *http.Request) error {
	sub, err := s.beginSubmit(w, r)
	if err != nil {
		return err
	}
	input, aerr := s.readTaskBody(w, r)
	if aerr == nil {
		if _, ok := input["prompt"]; !ok {
			aerr = errorf(weir.CodeInvalidRequest, "prompt", "missing required parameter: prompt")
		}
	}
	if aerr != nil {
		return aerr
	}
	model, _ := stringField(input, "model")
	cb, aerr := callbackOf(r, nil)
	if aerr != nil {
		return aerr
	}
	t, created, err := s.submitTask(w, r, sub, "video", input, model, cb)
	if err != nil {
		return err
	}
	s.answerSubmission(w, r, t, created, http.StatusOK, s.videoOf(r.Context(), t))
	return nil
}

func (s *Server) getVideo(w http.ResponseWriter, r *http.Request) error {
	t, err := s.ownTask(w, r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.videoOf(r.Context(), t))
	return nil
}

// videoVariants are the assets GET /v1/videos/{id}/content serves, as
// OpenAI names them; "" is the video.
var videoVariants = map[string]bool{"": true, "video": true, "thumbnail": true, "spritesheet": true}

// videoContent serves a finished video's asset (?variant=video, thumbnail
// or spritesheet) from the upstream, with the upstream's content type.
func (s *Server) videoContent(w http.ResponseWriter, r *http.Request) error {
	t, err := s.ownTask(w, r)
	if err != nil {
		return err
	}
	variant := r.URL.Query().Get("variant")
	if !videoVariants[variant] {
		return errorf(weir.CodeInvalidRequest, "variant", fmt.Sprintf("variant %q is not one of video, thumbnail, spritesheet", variant))
	}
	if t.Status != weir.TaskSucceeded {
		return errorf(weir.CodeNotFound, "id", fmt.Sprintf("video %s has no content: it is %s, not completed", t.ID, openAIVideoStatus(t.Status)))
	}
	resp, err := s.deps.Tasks.Content(r.Context(), t, variant)
	if err != nil {
		if errors.Is(err, gateway.ErrUpstream) {
			infoOf(w).log().Warn("video content not fetched", "task", t.ID, "error", causeOf(err))
		}
		return err
	}
	defer resp.Body.Close()
	for _, h := range []string{"Content-Type", "Content-Length", "Content-Disposition"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	// A client that stops reading loses the download after the write
	// timeout, as a stream does, rather than holding this handler and its
	// upstream connection.
	out := &clientWriter{w: w, rc: *http.NewResponseController(w), timeout: s.cfg.StreamWriteTimeout}
	defer out.clearDeadline()
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(out, resp.Body)
	return nil
}

// deleteVideo deletes a video as OpenAI does: one not yet finished is
// cancelled, a finished one deleted upstream; either way it is gone
// afterwards (GET and a second DELETE answer 404, listings leave it out).
func (s *Server) deleteVideo(w http.ResponseWriter, r *http.Request) error {
	return s.deleteOwnTask(w, r, "video")
}

// videoList is OpenAI's answer to GET /v1/videos (a cursor page: the
// first and last ids are null on an empty page).
type videoList struct {
	Object  string        `json:"object"`
	Data    []videoObject `json:"data"`
	FirstID *string       `json:"first_id"`
	LastID  *string       `json:"last_id"`
	HasMore bool          `json:"has_more"`
}

// listVideos is OpenAI's GET /v1/videos: the caller's videos, deleted
// ones left out, newest first unless ?order=asc; ?limit= 1–100 (default
// 20); ?after= the id of the last video of the previous page (it may have
// been deleted since). Tasks of the generic task API are not videos.
func (s *Server) listVideos(w http.ResponseWriter, r *http.Request) error {
	key, err := s.taskCaller(w, r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	limit, aerr := listLimit(q.Get("limit"), 20, 100)
	if aerr != nil {
		return aerr
	}
	f := weir.TaskFilter{KeyID: key.ID, Kind: "video", Limit: limit + 1, Descending: true}
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		f.Descending = false
	default:
		return errorf(weir.CodeInvalidRequest, "order", fmt.Sprintf("order must be asc or desc, not %q", q.Get("order")))
	}
	if after := q.Get("after"); after != "" {
		t, err := s.deps.Tasks.Get(r.Context(), after)
		if err != nil && !errors.Is(err, gateway.ErrTaskNotFound) {
			infoOf(w).log().Error("video lookup failed", "error", err)
			return errorf(weir.CodeInternal, "", "video lookup failed")
		}
		if err != nil || t.KeyID != key.ID || t.Kind != "video" {
			return errorf(weir.CodeInvalidRequest, "after", fmt.Sprintf("after must be the id of one of your videos, not %q", after))
		}
		if f.Descending {
			f.BeforeSeq = t.Seq
		} else {
			f.AfterSeq = t.Seq
		}
	}
	ts, err := s.deps.Tasks.List(r.Context(), f)
	if err != nil {
		infoOf(w).log().Error("video list failed", "error", err)
		return errorf(weir.CodeInternal, "", "could not list videos")
	}
	out := videoList{Object: "list", Data: []videoObject{}}
	if len(ts) > limit {
		ts, out.HasMore = ts[:limit], true
	}
	for _, t := range ts {
		out.Data = append(out.Data, s.videoOf(r.Context(), t))
	}
	if len(ts) > 0 {
		out.FirstID, out.LastID = &ts[0].ID, &ts[len(ts)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
