package httpapi

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// TestVideoObject checks the video object against OpenAI's: every field
// present, nullable ones null until known, the upstream's object deciding
// what it reports once the video is finished.
func TestVideoObject(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	finished := created.Add(time.Minute)
	running := weir.Task{ID: "video_1", Model: "sora-2", Status: weir.TaskRunning, Progress: 40, CreatedAt: created,
		Input: []byte(`{"model":"sora-2","prompt":"a weir at dawn","seconds":8}`)}
	succeeded := running
	succeeded.Status, succeeded.Progress, succeeded.FinishedAt = weir.TaskSucceeded, 100, finished
	succeeded.Result = []byte(`{"id":"video_up","object":"video","status":"completed","prompt":"upstream's copy",
		"seconds":"8","size":"720x1280","completed_at":1767323105,"expires_at":1767326705,"remixed_from_video_id":null}`)
	failed := running
	failed.Status, failed.FinishedAt, failed.ErrorCode, failed.ErrorMessage = weir.TaskFailed, finished, "video_generation_failed", "it failed"
	failed.Input = []byte(`{"prompt":"p","seconds":"4","size":"1280x720"}`)

	for _, tc := range []struct {
		name string
		task weir.Task
		want map[string]string // field → its JSON
	}{
		{"running", running, map[string]string{
			"id": `"video_1"`, "object": `"video"`, "model": `"sora-2"`, "status": `"in_progress"`, "progress": `40`,
			"created_at": `1767323045`, "completed_at": `null`, "expires_at": `null`, "prompt": `"a weir at dawn"`,
			"seconds": `"8"`, "size": `""`, "remixed_from_video_id": `null`, "error": `null`,
		}},
		{"succeeded", succeeded, map[string]string{
			"status": `"completed"`, "progress": `100`, "completed_at": `1767323105`, "expires_at": `1767326705`,
			"prompt": `"a weir at dawn"`, "seconds": `"8"`, "size": `"720x1280"`, "remixed_from_video_id": `null`, "error": `null`,
		}},
		{"failed", failed, map[string]string{
			"status": `"failed"`, "expires_at": `null`, "prompt": `"p"`, "seconds": `"4"`, "size": `"1280x720"`,
			"error": `{"code":"video_generation_failed","message":"it failed"}`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{}
			b, err := json.Marshal(s.videoOf(t.Context(), tc.task))
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]json.RawMessage
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"id", "object", "model", "status", "progress", "created_at", "completed_at",
				"expires_at", "prompt", "seconds", "size", "remixed_from_video_id", "error"} {
				if _, ok := got[f]; !ok {
					t.Errorf("no %q field in %s", f, b)
				}
			}
			for f, want := range tc.want {
				if string(got[f]) != want {
					t.Errorf("%s = %s, want %s", f, got[f], want)
				}
			}
		})
	}
}
