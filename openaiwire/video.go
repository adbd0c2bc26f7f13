// Package openaiwire holds OpenAI's wire types that more than one side of
// Weir speaks: the upstream adapter reads them, the mock provider writes
// them, and the API answers with them; the dialect translations read and
// write Chat Completions through them, and every side writes OpenAI's
// error body with ErrorJSON. It imports only the standard library, so any
// package may use it without an import cycle, and it sits beside
// provider/ rather than under it: the API, which is no adapter, is one of
// its sides.
package openaiwire

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
