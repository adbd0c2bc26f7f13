package simulate

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/provider"
)

// The zero Simulation answers a chat call at once, well, in OpenAI's
// shape, without leaving the process.
func TestChatAnswersWell(t *testing.T) {
	t.Parallel()
	chat, _ := New(weir.Simulation{}, Config{})
	resp, err := chat.Do(t.Context(), provider.Call{Path: "/chat/completions",
		Body: []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Object  string
		Choices []json.RawMessage
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK ||
		body.Object != "chat.completion" || len(body.Choices) == 0 {
		t.Fatalf("status %d, %+v, %v; want 200 and a chat completion", resp.StatusCode, body, err)
	}
}

// ErrorRate 1 answers every call 500, as the adapter's *provider.Error.
func TestErrorRate(t *testing.T) {
	t.Parallel()
	chat, _ := New(weir.Simulation{ErrorRate: 1}, Config{})
	resp, err := chat.Do(t.Context(), provider.Call{Path: "/chat/completions",
		Body: []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)})
	if resp != nil {
		resp.Body.Close()
	}
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != http.StatusInternalServerError {
		t.Fatalf("err %v; want a provider.Error with status 500", err)
	}
}

// A simulated job runs for JobDuration on the clock given, and its
// content is there once it has succeeded.
func TestJobFollowsTheClock(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	_, video := New(weir.Simulation{JobDuration: time.Minute}, Config{Clock: clk})
	job, err := video.Submit(t.Context(), provider.AsyncCall{Body: []byte(`{"model":"sora-2","prompt":"a weir"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if job.Status == provider.JobSucceeded {
		t.Fatalf("job %+v succeeded before its minute passed", job)
	}
	clk.Advance(time.Minute)
	if job, err = video.Poll(t.Context(), job.ID); err != nil || job.Status != provider.JobSucceeded {
		t.Fatalf("after a minute: %+v, %v; want succeeded", job, err)
	}
	resp, err := video.Content(t.Context(), job.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, err := io.ReadAll(resp.Body); err != nil || len(b) == 0 {
		t.Fatalf("content: %d bytes, %v", len(b), err)
	}
}
