// Package openaiwire holds OpenAI's wire types that more than one side of
// Weir speaks: the upstream adapter reads them, the mock provider writes
// them, and the API answers with them; the dialect translations read and
// write Chat Completions through them, and every side writes OpenAI's
// error body with ErrorJSON. It imports only the standard library, so any
// package may use it without an import cycle, and it sits beside
// provider/ rather than under it: the API, which is no adapter, is one of
// its sides.
package openaiwire

import (
	"encoding/json"

	"github.com/weir-gateway/weir/internal/fastjson"
)

// Video is OpenAI's video object (POST /v1/videos, GET /v1/videos/{id}),
// every field of it; nullable fields are pointers, written as null rather
// than left out, as OpenAI sends them.
type Video struct {
	ID     string `json:"id"`
	Object string `json:"object"` // "video"
	Model  string `json:"model"`
	// Status is one of VideoQueued, VideoInProgress, VideoCompleted and
	// VideoFailed.
	Status string `json:"status"`
	// Progress is a percentage. OpenAI sends an integer; a float reads the
	// fractions some OpenAI-compatible upstreams send, and writes an
	// integer as one ("42").
	Progress    float64 `json:"progress"`
	CreatedAt   int64   `json:"created_at"`
	CompletedAt *int64  `json:"completed_at"`
	ExpiresAt   *int64  `json:"expires_at"`
	// Prompt is null where it is not known.
	Prompt *string `json:"prompt"`
	// Seconds is the length, a string as OpenAI types it ("8").
	Seconds            string      `json:"seconds"`
	Size               string      `json:"size"`
	RemixedFromVideoID *string     `json:"remixed_from_video_id"`
	Error              *VideoError `json:"error"`
}

// VideoError is why a video failed.
type VideoError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// A video's statuses.
const (
	VideoQueued     = "queued"
	VideoInProgress = "in_progress"
	VideoCompleted  = "completed"
	VideoFailed     = "failed"
)

// UnmarshalVideo decodes a video object into v as json.Unmarshal does,
// the same result or the same error, as UnmarshalChatCompletion decodes
// an answer: a wrong-typed field's *json.UnmarshalTypeError, which a
// poll tolerates in a field a job is not made of, is json.Unmarshal's.
func UnmarshalVideo(body []byte, v *Video) error {
	r := fastjson.NewReader(body)
	var out Video
	readVideo(r, &out)
	if r.End() {
		*v = out
		return nil
	}
	// json.Unmarshal decodes into a Video of its own, so that v, which
	// it would make escape, stays where the caller has it.
	fallback := new(Video)
	err := json.Unmarshal(body, fallback)
	*v = *fallback
	return err
}

// The keys of a video object and of its error, which an unknown key must
// not match case-insensitively.
var (
	videoKeys      = []string{"id", "object", "model", "status", "progress", "created_at", "completed_at", "expires_at", "prompt", "seconds", "size", "remixed_from_video_id", "error"}
	videoErrorKeys = []string{"code", "message"}
)

func readVideo(r *fastjson.Reader, v *Video) {
	if !r.Open('{') {
		return // null too: json.Unmarshal decides
	}
	var seen uint64
	for r.Next('}') {
		key := r.Key()
		switch string(key) {
		case "id":
			r.Once(&seen, 0)
			v.ID = r.String()
		case "object":
			r.Once(&seen, 1)
			v.Object = r.String()
		case "model":
			r.Once(&seen, 2)
			v.Model = r.String()
		case "status":
			r.Once(&seen, 3)
			v.Status = r.String()
		case "progress":
			r.Once(&seen, 4)
			v.Progress = r.Float64()
		case "created_at":
			r.Once(&seen, 5)
			v.CreatedAt = r.Int64()
		case "completed_at":
			r.Once(&seen, 6)
			v.CompletedAt = r.Int64Ptr()
		case "expires_at":
			r.Once(&seen, 7)
			v.ExpiresAt = r.Int64Ptr()
		case "prompt":
			r.Once(&seen, 8)
			v.Prompt = r.StringPtr()
		case "seconds":
			r.Once(&seen, 9)
			v.Seconds = r.String()
		case "size":
			r.Once(&seen, 10)
			v.Size = r.String()
		case "remixed_from_video_id":
			r.Once(&seen, 11)
			v.RemixedFromVideoID = r.StringPtr()
		case "error":
			r.Once(&seen, 12)
			v.Error = readVideoError(r)
		default:
			r.SkipUnknown(key, videoKeys)
		}
	}
}

func readVideoError(r *fastjson.Reader) *VideoError {
	if r.Null() || !r.Open('{') {
		return nil
	}
	e := &VideoError{}
	var seen uint64
	for r.Next('}') {
		key := r.Key()
		switch string(key) {
		case "code":
			r.Once(&seen, 0)
			e.Code = r.String()
		case "message":
			r.Once(&seen, 1)
			e.Message = r.String()
		default:
			r.SkipUnknown(key, videoErrorKeys)
		}
	}
	return e
}
