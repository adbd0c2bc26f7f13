package e2e

// The task and video APIs as a client sees them: cancel of a queued and
// of a running task, Idempotency-Key, queue positions, terminal states
// that stay put, and /v1/videos through the official OpenAI Go SDK.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/respjson"

	"github.com/weir-gateway/weir/provider/mock"
)

// cancelTask posts a cancel and returns the task as answered.
func (g *gateway) cancelTask(t *testing.T, key, id string) taskObject {
	t.Helper()
	rep := g.do(t, request{Path: "/v1/tasks/" + id + "/cancel", Key: key})
	if rep.Status != http.StatusOK {
		t.Fatalf("cancel %s: %d %s", id, rep.Status, rep.Body)
	}
	var o taskObject
	if err := json.Unmarshal(rep.Body, &o); err != nil {
		t.Fatalf("cancel %s: %v", id, err)
	}
	return o
}

// TestTaskCancel runs a capacity of 1 with a long upstream job: A runs,
// B, C and D wait. GET shows their queue positions; cancelling C takes it
// out of the queue at once and moves D up; cancelling A deletes its job
// upstream and frees its capacity for B; a cancelled task stays cancelled
// after its worker's next step; C and D never reach the upstream.
func TestTaskCancel(t *testing.T) {
	t.Parallel()
	up := startVideoUpstream(t, mock.Config{JobDuration: time.Minute})
	g := startGateway(t, "", videoCatalog(up.URL, taskOptions{Workers: 8, Concurrency: 1}))
	_, key := g.createKey(t)
	var ids []string
	for _, p := range []string{"A", "B", "C", "D"} {
		o, _ := g.submitTask(t, key, taskBody(p, ""), "")
		ids = append(ids, o.ID)
	}
	a, b, c, d := ids[0], ids[1], ids[2], ids[3]
	waitFor(t, 10*time.Second, "A to run upstream", func() bool { return g.getTask(t, key, a).Status == "running" })

	for i, id := range ids[1:] {
		o := g.getTask(t, key, id)
		if o.Status != "queued" || o.Queue == nil || o.Queue.Position != i+1 {
			t.Errorf("task %d: status %s, queue %+v; want queued at position %d", i+1, o.Status, o.Queue, i+1)
		}
	}
	rep := g.do(t, request{Method: http.MethodGet, Path: "/v1/videos/" + c, Key: key})
	var v struct {
		Status string `json:"status"`
		Weir   struct {
			Status        string   `json:"status"`
			QueuePosition *int     `json:"queue_position"`
			EstimatedWait *float64 `json:"estimated_wait_seconds"`
		} `json:"weir"`
	}
	if rep.Status != http.StatusOK || json.Unmarshal(rep.Body, &v) != nil || v.Status != "queued" ||
		v.Weir.QueuePosition == nil || *v.Weir.QueuePosition != 2 || v.Weir.EstimatedWait == nil {
		t.Errorf("GET /v1/videos/{C}: %d %s, want queued at position 2 with a wait estimate", rep.Status, rep.Body)
	}
	pm := "pm:" + videoPM
	if w := g.scope(t, pm).Waiting; w != 3 {
		t.Errorf("%s has %d waiting, want 3", pm, w)
	}

	// Cancel a queued task: out of the queue by the time the answer comes.
	if o := g.cancelTask(t, key, c); o.Status != "cancelled" || o.Error == nil || o.Error.Code != "cancelled" || o.Queue != nil {
		t.Errorf("cancelled C: %+v, want cancelled with error code cancelled and no queue place", o)
	}
	if w := g.scope(t, pm).Waiting; w != 2 {
		t.Errorf("right after cancelling C, %s has %d waiting, want 2", pm, w)
	}
	if o := g.getTask(t, key, d); o.Queue == nil || o.Queue.Position != 2 {
		t.Errorf("D after C left: queue %+v, want position 2", o.Queue)
	}

	// Cancel the running task: its upstream job is deleted and its
	// capacity goes to B.
	jobA := up.jobsByTask()[a]
	if len(jobA) != 1 {
		t.Fatalf("A's upstream jobs: %+v", jobA)
	}
	if o := g.cancelTask(t, key, a); o.Status != "cancelled" {
		t.Errorf("cancelled A: %+v", o)
	}
	if got := up.Deletes(); !slices.Equal(got, []string{jobA[0].ID}) {
		t.Errorf("upstream deletes %v, want A's job %s", got, jobA[0].ID)
	}
	if n := up.Mock.Stats().JobsCancelled; n != 1 {
		t.Errorf("mock cancelled %d jobs, want 1", n)
	}
	waitFor(t, 10*time.Second, "B to run upstream", func() bool { return g.getTask(t, key, b).Status == "running" })
	if s := g.scope(t, pm); s.InFlight != 1 || s.Waiting != 1 {
		t.Errorf("%s: %+v, want B in flight and D waiting", pm, s)
	}

	// A's run job takes its next step, finds A cancelled and stops; A stays
	// cancelled.
	db := openDB(t, g.DB)
	waitFor(t, 10*time.Second, "A's run job to end", func() bool {
		for _, j := range riverJobs(t, db, "weir_task_run") {
			if j.TaskID == a {
				return j.State == "completed"
			}
		}
		return false
	})
	if o := g.getTask(t, key, a); o.Status != "cancelled" {
		t.Errorf("A after its worker's next step: %s, want cancelled", o.Status)
	}
	if o := g.cancelTask(t, key, a); o.Status != "cancelled" {
		t.Errorf("A cancelled again: %s", o.Status)
	}

	g.cancelTask(t, key, d)
	g.cancelTask(t, key, b)
	g.waitNoLeases(t, 10*time.Second)
	for _, id := range []string{c, d} {
		if slices.Contains(up.Submits(), id) {
			t.Errorf("cancelled queued task %s reached the upstream", id)
		}
	}
	for id, st := range g.statuses(t, key) {
		if st != "cancelled" {
			t.Errorf("task %s is %s, want cancelled", id, st)
		}
	}
}

// TestTaskIdempotencyKey: a repeated submission with the same
// Idempotency-Key returns the first task (200 instead of 202), also when
// eight race; another key, or the same key from another API key, makes a
// new task; one upstream job per task.
func TestTaskIdempotencyKey(t *testing.T) {
	t.Parallel()
	up := startVideoUpstream(t, mock.Config{})
	g := startGateway(t, "", videoCatalog(up.URL, taskOptions{Workers: 4}))
	_, key := g.createKey(t)
	_, key2 := g.createKey(t)

	first, st := g.submitTask(t, key, taskBody("idem", ""), "k-1")
	if st != http.StatusAccepted {
		t.Errorf("first submission: %d, want 202", st)
	}
	again, st := g.submitTask(t, key, taskBody("idem", ""), "k-1")
	if st != http.StatusOK || again.ID != first.ID {
		t.Errorf("repeat: %d %s, want 200 %s", st, again.ID, first.ID)
	}
	other, _ := g.submitTask(t, key, taskBody("idem", ""), "k-2")
	theirs, _ := g.submitTask(t, key2, taskBody("idem", ""), "k-1")
	if other.ID == first.ID || theirs.ID == first.ID || other.ID == theirs.ID {
		t.Errorf("ids %s (k-2), %s (another API key's k-1), want both new, not %s", other.ID, theirs.ID, first.ID)
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[string]int{}
	created := 0
	for range 8 {
		wg.Go(func() {
			rep, err := g.send(context.Background(), request{Path: "/v1/tasks", Key: key, Body: taskBody("race", ""),
				Header: map[string]string{"Idempotency-Key": "k-race"}})
			if err != nil {
				t.Error(err)
				return
			}
			var o taskObject
			_ = json.Unmarshal(rep.Body, &o)
			mu.Lock()
			got[o.ID]++
			if rep.Status == http.StatusAccepted {
				created++
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(got) != 1 || created != 1 {
		t.Errorf("eight racing submissions with one key made tasks %v (%d answered 202), want one", got, created)
	}

	// The video API honours the header too.
	video := func() string {
		rep := g.do(t, request{Path: "/v1/videos", Key: key, Body: `{"model":"` + videoModel + `","prompt":"idem video"}`,
			Header: map[string]string{"Idempotency-Key": "k-video"}})
		var v struct{ ID string }
		if rep.Status != http.StatusOK || json.Unmarshal(rep.Body, &v) != nil || v.ID == "" {
			t.Fatalf("POST /v1/videos: %d %s", rep.Status, rep.Body)
		}
		return v.ID
	}
	if v1, v2 := video(), video(); v1 != v2 {
		t.Errorf("videos with one Idempotency-Key: %s and %s", v1, v2)
	}

	var all []string
	for id := range g.statuses(t, key) {
		all = append(all, id)
	}
	g.waitTerminal(t, key, all, 20*time.Second)
	if len(all) != 4 {
		t.Errorf("the key has %d tasks, want 4 (k-1, k-2, k-race, k-video)", len(all))
	}
	checkSubmittedOnce(t, up, all)
	if n := up.Mock.Stats().JobsSubmitted; n != 5 {
		t.Errorf("mock started %d jobs, want 5 (4 tasks of the key, 1 of the other)", n)
	}

	// The IETF httpapi Idempotency-Key draft: a key reused with a
	// different request gets 422 and creates nothing; the same request
	// (keys in another order, other whitespace) is still a repeat.
	t.Run("different body", func(t *testing.T) {
		before := g.statuses(t, key)
		jobs := up.Mock.Stats().JobsSubmitted
		rep := g.do(t, request{Path: "/v1/tasks", Key: key, Body: taskBody("something else", ""),
			Header: map[string]string{"Idempotency-Key": "k-1"}})
		if e := checkError(t, rep, http.StatusUnprocessableEntity, "idempotency_key_reused"); e.Param == nil || *e.Param != "Idempotency-Key" {
			t.Errorf("error param %v, want Idempotency-Key", e.Param)
		}
		// One field more is another request too.
		rep = g.do(t, request{Path: "/v1/tasks", Key: key, Body: `{"model":"` + videoModel + `","input":{"prompt":"idem","seconds":"4","size":"1280x720"}}`,
			Header: map[string]string{"Idempotency-Key": "k-1"}})
		checkError(t, rep, http.StatusUnprocessableEntity, "idempotency_key_reused")
		// The video API: another prompt under the video's key.
		rep = g.do(t, request{Path: "/v1/videos", Key: key, Body: `{"model":"` + videoModel + `","prompt":"another video"}`,
			Header: map[string]string{"Idempotency-Key": "k-video"}})
		checkError(t, rep, http.StatusUnprocessableEntity, "idempotency_key_reused")
		if after := g.statuses(t, key); len(after) != len(before) {
			t.Errorf("refused submissions changed the key's tasks from %d to %d", len(before), len(after))
		}

		// The same request, written differently, is a repeat.
		same := `{ "input": {"seconds":"4", "prompt":"idem"},
			"model": "` + videoModel + `" }`
		again, st := g.submitTask(t, key, same, "k-1")
		if st != http.StatusOK || again.ID != first.ID {
			t.Errorf("the same request reordered: %d %s, want 200 %s", st, again.ID, first.ID)
		}
		if n := up.Mock.Stats().JobsSubmitted; n != jobs {
			t.Errorf("refused and repeated submissions started %d upstream jobs", n-jobs)
		}
	})

	t.Run("different bodies racing", func(t *testing.T) {
		before := len(g.statuses(t, key))
		const racers = 8
		var wg sync.WaitGroup
		start := make(chan struct{})
		reps := make([]*reply, racers)
		for i := range racers {
			wg.Go(func() {
				<-start
				rep, err := g.send(context.Background(), request{Path: "/v1/tasks", Key: key,
					Body: taskBody(fmt.Sprintf("racer %d", i), ""), Header: map[string]string{"Idempotency-Key": "k-race-bodies"}})
				if err != nil {
					t.Error(err)
					return
				}
				reps[i] = rep
			})
		}
		close(start)
		wg.Wait()
		var created []string
		for i, rep := range reps {
			if rep == nil {
				continue
			}
			switch rep.Status {
			case http.StatusAccepted:
				var o taskObject
				_ = json.Unmarshal(rep.Body, &o)
				created = append(created, o.ID)
			case http.StatusUnprocessableEntity:
				checkError(t, rep, http.StatusUnprocessableEntity, "idempotency_key_reused")
			default:
				t.Errorf("racer %d: %d %s, want 202 or 422", i, rep.Status, rep.Body)
			}
		}
		if len(created) != 1 {
			t.Fatalf("racers with one key and different bodies created %v, want one task", created)
		}
		after := g.statuses(t, key)
		if _, ok := after[created[0]]; !ok || len(after) != before+1 {
			t.Errorf("after the race the key has %d tasks (had %d), winner %s listed: %v; want one more, the winner", len(after), before, created[0], ok)
		}
		g.waitTerminal(t, key, created, 20*time.Second)
	})
}

// TestTaskTerminalStays: a succeeded task cannot be cancelled into
// another state (deleted, it is gone), and a task that waited past its
// max wait expires and stays expired.
func TestTaskTerminalStays(t *testing.T) {
	t.Parallel()
	up := startVideoUpstream(t, mock.Config{JobDuration: 20 * time.Second})
	g := startGateway(t, "", videoCatalog(up.URL, taskOptions{Workers: 1}))
	_, key := g.createKey(t)

	// The blocker holds the one worker while "impatient" waits 1s at most.
	blocker, _ := g.submitTask(t, key, taskBody("blocker", ""), "")
	waitFor(t, 10*time.Second, "the blocker to run", func() bool { return g.getTask(t, key, blocker.ID).Status == "running" })
	rep := g.do(t, request{Path: "/v1/tasks", Key: key, Body: taskBody("impatient", ""), Header: map[string]string{"X-Weir-Max-Wait": "1s"}})
	var imp taskObject
	if rep.Status != http.StatusAccepted || json.Unmarshal(rep.Body, &imp) != nil {
		t.Fatalf("submit with a max wait: %d %s", rep.Status, rep.Body)
	}
	waitFor(t, 10*time.Second, "the impatient task to expire", func() bool { return g.getTask(t, key, imp.ID).Status == "expired" })
	if o := g.getTask(t, key, imp.ID); o.Error == nil || o.Error.Code != "expired" || o.FinishedAt == nil {
		t.Errorf("expired task: %+v", o)
	}
	if o := g.cancelTask(t, key, imp.ID); o.Status != "expired" {
		t.Errorf("cancel of an expired task answered %s", o.Status)
	}

	// Free the worker, and let the next job end at once.
	if err := up.Mock.Update(func(c *mock.Config) { c.JobDuration = 0 }); err != nil {
		t.Fatal(err)
	}
	g.cancelTask(t, key, blocker.ID)
	done, _ := g.submitTask(t, key, taskBody("done", ""), "")
	g.waitTerminal(t, key, []string{done.ID}, 20*time.Second)
	if o := g.getTask(t, key, done.ID); o.Status != "succeeded" || o.Progress != 100 || len(o.Result) == 0 || string(o.Result) == "null" {
		t.Fatalf("done: %+v", o)
	}
	if o := g.cancelTask(t, key, done.ID); o.Status != "succeeded" {
		t.Errorf("cancel of a succeeded task answered %s", o.Status)
	}
	if o := g.getTask(t, key, done.ID); o.Status != "succeeded" {
		t.Errorf("after a cancel, a succeeded task is %s", o.Status)
	}
	if rep := g.do(t, request{Method: http.MethodDelete, Path: "/v1/videos/" + done.ID, Key: key}); rep.Status != http.StatusOK {
		t.Errorf("DELETE: %d %s", rep.Status, rep.Body)
	}
	checkError(t, g.do(t, request{Method: http.MethodGet, Path: "/v1/tasks/" + done.ID, Key: key}), http.StatusNotFound, "not_found")
	g.waitNoLeases(t, 10*time.Second)
}

// TestVideosOfficialSDK drives /v1/videos with the official OpenAI Go SDK,
// unchanged but for its base URL and key: create (multipart, as the SDK
// sends it), poll with Get until completed, download the content, delete.
func TestVideosOfficialSDK(t *testing.T) {
	t.Parallel()
	up := startVideoUpstream(t, mock.Config{JobDuration: 500 * time.Millisecond})
	g := startGateway(t, "", videoCatalog(up.URL, taskOptions{Workers: 2}))
	_, secret := g.createKey(t)
	client := openai.NewClient(
		option.WithBaseURL(g.URL+"/v1/"),
		option.WithAPIKey(secret),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(20*time.Second),
	)
	ctx := context.Background()
	v, err := client.Videos.New(ctx, openai.VideoNewParams{
		Model: openai.VideoModel(videoModel), Prompt: "a weir at dawn", Seconds: openai.VideoSeconds8, Size: openai.VideoSize1280x720,
	})
	if err != nil {
		t.Fatalf("Videos.New: %v", err)
	}
	if v.ID == "" || v.Object != "video" || string(v.Model) != videoModel || v.Seconds != "8" || v.Size != "1280x720" {
		t.Errorf("Videos.New answered %+v", v)
	}
	if v.Status != openai.VideoStatusQueued && v.Status != openai.VideoStatusInProgress {
		t.Errorf("new video status %q", v.Status)
	}
	waitFor(t, 20*time.Second, "the video to complete", func() bool {
		got, err := client.Videos.Get(ctx, v.ID)
		if err != nil {
			t.Fatalf("Videos.Get: %v", err)
		}
		v = got
		if v.Status == openai.VideoStatusFailed {
			t.Fatalf("video failed: %+v", v.Error)
		}
		return v.Status == openai.VideoStatusCompleted
	})
	if v.Progress != 100 || v.CompletedAt == 0 {
		t.Errorf("completed video: %+v", v)
	}
	resp, err := client.Videos.DownloadContent(ctx, v.ID, openai.VideoDownloadContentParams{})
	if err != nil {
		t.Fatalf("Videos.DownloadContent: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Content-Type") != "video/mp4" || len(body) < 12 || !bytes.Equal(body[4:8], []byte("ftyp")) {
		t.Errorf("content: %s, %d bytes %q", resp.Header.Get("Content-Type"), len(body), body[:min(len(body), 12)])
	}
	_, err = client.Videos.Get(ctx, "video_missing")
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("Get of a missing video: %v, want a 404 *openai.Error", err)
	}

	// Every field of OpenAI's video object, as the SDK decodes it: the
	// prompt, the upstream's expiry once completed, and a null (present)
	// remixed_from_video_id.
	t.Run("fields", func(t *testing.T) {
		if v.Prompt != "a weir at dawn" || !v.JSON.Prompt.Valid() {
			t.Errorf("prompt %q", v.Prompt)
		}
		if !v.JSON.ExpiresAt.Valid() || v.ExpiresAt < v.CompletedAt {
			t.Errorf("expires_at %q, completed_at %d: want the upstream's expiry, after completion", v.JSON.ExpiresAt.Raw(), v.CompletedAt)
		}
		if raw := v.JSON.RemixedFromVideoID.Raw(); raw != "null" {
			t.Errorf("remixed_from_video_id %q, want null", raw)
		}
		if raw := v.JSON.Error.Raw(); raw != "null" {
			t.Errorf("error %q, want null", raw)
		}
		if v.Seconds != "8" || v.Size != "1280x720" {
			t.Errorf("seconds %q, size %q", v.Seconds, v.Size)
		}
		for name, f := range map[string]respjson.Field{"id": v.JSON.ID, "object": v.JSON.Object, "model": v.JSON.Model,
			"status": v.JSON.Status, "progress": v.JSON.Progress, "created_at": v.JSON.CreatedAt, "completed_at": v.JSON.CompletedAt,
			"seconds": v.JSON.Seconds, "size": v.JSON.Size} {
			if !f.Valid() {
				t.Errorf("%s: %q, not a valid value", name, f.Raw())
			}
		}
	})
	t.Run("thumbnail", func(t *testing.T) {
		resp, err := client.Videos.DownloadContent(ctx, v.ID, openai.VideoDownloadContentParams{Variant: openai.VideoDownloadContentParamsVariantThumbnail})
		if err != nil {
			t.Fatalf("thumbnail: %v", err)
		}
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "image/webp" {
			t.Errorf("thumbnail: %s, want image/webp", ct)
		}
	})

	// Listed, with two more, in pages the SDK follows by last_id: newest
	// first, as OpenAI lists.
	t.Run("list", func(t *testing.T) {
		want := []string{v.ID}
		for _, p := range []string{"second", "third"} {
			nv, err := client.Videos.New(ctx, openai.VideoNewParams{Model: openai.VideoModel(videoModel), Prompt: p})
			if err != nil {
				t.Fatalf("Videos.New: %v", err)
			}
			want = append([]string{nv.ID}, want...)
		}
		page, err := client.Videos.List(ctx, openai.VideoListParams{Limit: openai.Int(2)})
		if err != nil {
			t.Fatalf("Videos.List: %v", err)
		}
		if len(page.Data) != 2 || !page.HasMore || page.LastID != want[1] || page.Data[0].ID != want[0] {
			t.Fatalf("first page: %d videos, has_more %v, last_id %q; want %v, more", len(page.Data), page.HasMore, page.LastID, want[:2])
		}
		next, err := page.GetNextPage()
		if err != nil || next == nil {
			t.Fatalf("GetNextPage: %v, %v", next, err)
		}
		if len(next.Data) != 1 || next.Data[0].ID != v.ID || next.HasMore {
			t.Errorf("second page: %+v, want %s alone, no more", next.Data, v.ID)
		}
		if next.Data[0].Status != openai.VideoStatusCompleted || next.Data[0].Prompt != "a weir at dawn" {
			t.Errorf("the listed video: %+v", next.Data[0])
		}
		var all []string
		iter := client.Videos.ListAutoPaging(ctx, openai.VideoListParams{Limit: openai.Int(1), Order: openai.VideoListParamsOrderAsc})
		for iter.Next() {
			all = append(all, iter.Current().ID)
		}
		if err := iter.Err(); err != nil {
			t.Fatalf("ListAutoPaging: %v", err)
		}
		if slices.Reverse(want); !slices.Equal(all, want) {
			t.Errorf("ListAutoPaging oldest first, one a page: %v, want %v", all, want)
		}
	})

	// Deleted, the video is gone: Get and a second Delete are 404s.
	del, err := client.Videos.Delete(ctx, v.ID)
	if err != nil || !del.Deleted || del.ID != v.ID || del.Object != "video.deleted" {
		t.Errorf("Videos.Delete: %+v, %v", del, err)
	}
	if _, err = client.Videos.Get(ctx, v.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("Get of a deleted video: %v, want a 404 *openai.Error", err)
	}
	if _, err = client.Videos.Delete(ctx, v.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("second Delete: %v, want a 404 *openai.Error", err)
	}
}

// videoJobOf returns the upstream job id of a task, from the mock's jobs.
func (u *videoUpstream) videoJobOf(t *testing.T, taskID string) string {
	t.Helper()
	jobs := u.jobsByTask()[taskID]
	if len(jobs) != 1 {
		t.Fatalf("task %s has upstream jobs %+v, want one", taskID, jobs)
	}
	return jobs[0].ID
}

// TestVideoContentVariants: GET /v1/videos/{id}/content passes ?variant=
// upstream and the upstream's content type back; an unknown variant is a
// 400 that reaches no upstream; a video not completed has no content
// (404).
func TestVideoContentVariants(t *testing.T) {
	t.Parallel()
	up := startVideoUpstream(t, mock.Config{JobDuration: time.Minute})
	g := startGateway(t, "", videoCatalog(up.URL, taskOptions{Workers: 2}))
	_, key := g.createKey(t)
	running, _ := g.submitTask(t, key, taskBody("still running", ""), "")
	waitFor(t, 10*time.Second, "the first task to run upstream", func() bool { return g.getTask(t, key, running.ID).Status == "running" })
	if err := up.Mock.Update(func(c *mock.Config) { c.JobDuration = 0 }); err != nil {
		t.Fatal(err)
	}
	done, _ := g.submitTask(t, key, taskBody("done at once", ""), "")
	if o := g.waitTerminal(t, key, []string{done.ID}, 20*time.Second)[done.ID]; o.Status != "succeeded" {
		t.Fatalf("task %s: %s %+v", done.ID, o.Status, o.Error)
	}
	job := up.videoJobOf(t, done.ID)

	for _, tc := range []struct {
		query, ctype string
		magic        func(b []byte) bool
	}{
		{"", "video/mp4", func(b []byte) bool { return len(b) > 8 && string(b[4:8]) == "ftyp" }},
		{"?variant=video", "video/mp4", func(b []byte) bool { return len(b) > 8 && string(b[4:8]) == "ftyp" }},
		{"?variant=thumbnail", "image/webp", func(b []byte) bool { return len(b) > 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP" }},
		{"?variant=spritesheet", "image/jpeg", func(b []byte) bool { return len(b) > 3 && bytes.Equal(b[:3], []byte{0xff, 0xd8, 0xff}) }},
	} {
		before := len(up.Contents())
		rep := g.do(t, request{Method: http.MethodGet, Path: "/v1/videos/" + done.ID + "/content" + tc.query, Key: key})
		if rep.Status != http.StatusOK || rep.Header.Get("Content-Type") != tc.ctype || !tc.magic(rep.Body) {
			t.Errorf("content%s: %d %s, %d bytes %q", tc.query, rep.Status, rep.Header.Get("Content-Type"), len(rep.Body), rep.Body[:min(len(rep.Body), 12)])
		}
		if got := up.Contents()[before:]; !slices.Equal(got, []string{"/v1/videos/" + job + "/content" + tc.query}) {
			t.Errorf("content%s asked the upstream for %v", tc.query, got)
		}
	}

	before := len(up.Contents())
	for _, q := range []string{"?variant=gif", "?variant=", "?variant=THUMBNAIL"} {
		rep := g.do(t, request{Method: http.MethodGet, Path: "/v1/videos/" + done.ID + "/content" + q, Key: key})
		if q == "?variant=" {
			// An empty variant is the default, as the SDKs leave it out.
			if rep.Status != http.StatusOK || rep.Header.Get("Content-Type") != "video/mp4" {
				t.Errorf("content%s: %d %s", q, rep.Status, rep.Header.Get("Content-Type"))
			}
			before++
			continue
		}
		if e := checkError(t, rep, http.StatusBadRequest, "invalid_request"); e.Param == nil || *e.Param != "variant" {
			t.Errorf("content%s: param %v, want variant", q, e.Param)
		}
	}
	if got := up.Contents(); len(got) != before {
		t.Errorf("unknown variants reached the upstream: %v", got[before:])
	}

	// A video still running has no content yet.
	rep := g.do(t, request{Method: http.MethodGet, Path: "/v1/videos/" + running.ID + "/content?variant=thumbnail", Key: key})
	e := checkError(t, rep, http.StatusNotFound, "not_found")
	if !strings.Contains(e.Message, "in_progress") {
		t.Errorf("content of a running video: %q, want it to say the video is in progress", e.Message)
	}
	if got := up.Contents(); len(got) != before {
		t.Errorf("content of a running video reached the upstream: %v", got[before:])
	}
	g.cancelTask(t, key, running.ID)
	g.waitNoLeases(t, 10*time.Second)
}

// deleteVideo sends DELETE /v1/videos/{id} and checks OpenAI's answer,
// {"id", "object": "video.deleted", "deleted": true}.
func (g *gateway) deleteVideo(t *testing.T, key, id string) {
	t.Helper()
	rep := g.do(t, request{Method: http.MethodDelete, Path: "/v1/videos/" + id, Key: key})
	var got map[string]any
	if rep.Status != http.StatusOK || json.Unmarshal(rep.Body, &got) != nil || len(got) != 3 ||
		got["id"] != id || got["object"] != "video.deleted" || got["deleted"] != true {
		t.Errorf("DELETE /v1/videos/%s: %d %s, want {id, object video.deleted, deleted true}", id, rep.Status, rep.Body)
	}
}

// checkGone checks that a deleted video answers 404 everywhere and is
// not listed.
func (g *gateway) checkGone(t *testing.T, key, id string) {
	t.Helper()
	for _, r := range []request{
		{Method: http.MethodGet, Path: "/v1/videos/" + id},
		{Method: http.MethodGet, Path: "/v1/videos/" + id + "/content"},
		{Method: http.MethodGet, Path: "/v1/tasks/" + id},
		{Method: http.MethodPost, Path: "/v1/tasks/" + id + "/cancel"},
		{Method: http.MethodDelete, Path: "/v1/videos/" + id},
	} {
		r.Key = key
		rep := g.do(t, r)
		if rep.Status != http.StatusNotFound {
			t.Errorf("%s %s of a deleted video: %d %s, want 404", r.Method, r.Path, rep.Status, rep.Body)
			continue
		}
		checkError(t, rep, http.StatusNotFound, "not_found")
	}
	if st, ok := g.statuses(t, key)[id]; ok {
		t.Errorf("deleted video %s is listed, %s", id, st)
	}
}

// createVideo posts a video and returns its id.
func (g *gateway) createVideo(t *testing.T, key, prompt, idemKey string) string {
	t.Helper()
	r := request{Path: "/v1/videos", Key: key, Body: `{"model":"` + videoModel + `","prompt":"` + prompt + `"}`}
	if idemKey != "" {
		r.Header = map[string]string{"Idempotency-Key": idemKey}
	}
	rep := g.do(t, r)
	var v struct{ ID string }
	if rep.Status != http.StatusOK || json.Unmarshal(rep.Body, &v) != nil || v.ID == "" {
		t.Fatalf("POST /v1/videos: %d %s", rep.Status, rep.Body)
	}
	return v.ID
}

// TestVideoDelete: DELETE /v1/videos/{id} as OpenAI's: a finished video
// is deleted upstream and gone (404 for GET, content, the task API and a
// second DELETE; not listed; its Idempotency-Key not reusable); a running
// one is cancelled, its upstream job deleted and its capacity freed; a
// queued one leaves the queue and never reaches the upstream; another
// key's video is not found and stays.
func TestVideoDelete(t *testing.T) {
	t.Parallel()
	up := startVideoUpstream(t, mock.Config{})
	g := startGateway(t, "", videoCatalog(up.URL, taskOptions{Workers: 8, Concurrency: 1}))
	_, key := g.createKey(t)
	_, other := g.createKey(t)

	done := g.createVideo(t, key, "done", "k-done")
	if o := g.waitTerminal(t, key, []string{done}, 20*time.Second)[done]; o.Status != "succeeded" {
		t.Fatalf("video %s: %s %+v", done, o.Status, o.Error)
	}
	doneJob := up.videoJobOf(t, done)
	if err := up.Mock.Update(func(c *mock.Config) { c.JobDuration = time.Minute }); err != nil {
		t.Fatal(err)
	}
	running := g.createVideo(t, key, "running", "")
	waitFor(t, 10*time.Second, "a video to run upstream", func() bool { return g.getTask(t, key, running).Status == "running" })
	next := g.createVideo(t, key, "next", "")
	queued := g.createVideo(t, key, "queued", "")
	runningJob := up.videoJobOf(t, running)

	// Another key's DELETE finds nothing and changes nothing.
	checkError(t, g.do(t, request{Method: http.MethodDelete, Path: "/v1/videos/" + done, Key: other}), http.StatusNotFound, "not_found")
	if o := g.getTask(t, key, done); o.Status != "succeeded" || len(up.Deletes()) != 0 {
		t.Fatalf("after another key's DELETE: %s, upstream deletes %v", o.Status, up.Deletes())
	}

	// A finished video: deleted upstream, then gone.
	g.deleteVideo(t, key, done)
	if got := up.Deletes(); !slices.Equal(got, []string{doneJob}) {
		t.Errorf("upstream deletes %v, want the finished video's job %s", got, doneJob)
	}
	if _, held := up.jobsByTask()[done]; held {
		t.Errorf("the upstream still holds the deleted video's job")
	}
	g.checkGone(t, key, done)
	if got := up.Deletes(); len(got) != 1 {
		t.Errorf("a second DELETE reached the upstream: %v", got)
	}
	// Its Idempotency-Key stays taken: a repeat does not make a new video.
	rep := g.do(t, request{Path: "/v1/videos", Key: key, Body: `{"model":"` + videoModel + `","prompt":"done"}`,
		Header: map[string]string{"Idempotency-Key": "k-done"}})
	checkError(t, rep, http.StatusNotFound, "not_found")

	// A running video: cancelled, its upstream job deleted, its capacity
	// handed to the next.
	g.deleteVideo(t, key, running)
	if got := up.Deletes(); !slices.Equal(got, []string{doneJob, runningJob}) {
		t.Errorf("upstream deletes %v, want %s then the running video's job %s", got, doneJob, runningJob)
	}
	if n := up.Mock.Stats().JobsCancelled; n != 1 {
		t.Errorf("mock cancelled %d jobs, want 1", n)
	}
	g.checkGone(t, key, running)
	waitFor(t, 10*time.Second, "the next video to run", func() bool { return g.getTask(t, key, next).Status == "running" })

	// A queued video: out of the queue, never submitted.
	if o := g.getTask(t, key, queued); o.Status != "queued" {
		t.Fatalf("video %s is %s, want queued", queued, o.Status)
	}
	g.deleteVideo(t, key, queued)
	g.checkGone(t, key, queued)
	g.deleteVideo(t, key, next)
	g.checkGone(t, key, next)
	g.waitNoLeases(t, 10*time.Second)
	if slices.Contains(up.Submits(), queued) {
		t.Errorf("the deleted queued video %s reached the upstream", queued)
	}
	if got := g.statuses(t, key); len(got) != 0 {
		t.Errorf("after deleting every video the key lists %v", got)
	}
}

// TestTaskUpstreamSaturated: the platform model admits 3 at once but the
// upstream account runs only 1 job (MaxJobs 1, answering 429 with
// Retry-After past it, as a provider shared with other clients does). All
// tasks still succeed, one upstream job each; the gateway should wait
// before it tries a refused submit again rather than send it back at
// once.
func TestTaskUpstreamSaturated(t *testing.T) {
	t.Parallel()
	up := startVideoUpstream(t, mock.Config{JobDuration: time.Second, MaxJobs: 1, RetryAfter: time.Second})
	g := startGateway(t, "", videoCatalog(up.URL, taskOptions{Workers: 8, Concurrency: 3}))
	_, key := g.createKey(t)
	var ids []string
	for _, p := range []string{"A", "B", "C", "D"} {
		o, _ := g.submitTask(t, key, taskBody(p, ""), "")
		ids = append(ids, o.ID)
	}
	start := time.Now()
	final := g.waitTerminal(t, key, ids, 60*time.Second)
	took := time.Since(start)
	for _, id := range ids {
		if final[id].Status != "succeeded" {
			t.Errorf("task %s: %s %+v", id, final[id].Status, final[id].Error)
		}
	}
	checkSubmittedOnce(t, up, ids)
	g.waitNoLeases(t, 10*time.Second)
	st := up.Mock.Stats()
	if st.PeakJobsRunning > 1 {
		t.Errorf("upstream ran %d jobs at once past its cap of 1", st.PeakJobsRunning)
	}
	t.Logf("4 tasks through an upstream cap of 1 in %s; %d submits refused with 429", took.Round(time.Millisecond), st.JobsRejected)
	// Four 1s jobs one after another take about 4s; a client honouring
	// Retry-After: 1 makes a few refused submits a task, not dozens.
	if limit := int64(5 * len(ids)); st.JobsRejected > limit {
		t.Errorf("%d submits refused with 429 in %s for 4 tasks (want at most %d): a refused task was submitted again without waiting out Retry-After",
			st.JobsRejected, took.Round(time.Millisecond), limit)
	}
}

// deleteTask sends DELETE /v1/tasks/{id} and checks the answer,
// {"id", "object": "task.deleted", "deleted": true}.
func (g *gateway) deleteTask(t *testing.T, key, id string) {
	t.Helper()
	rep := g.do(t, request{Method: http.MethodDelete, Path: "/v1/tasks/" + id, Key: key})
	var got map[string]any
	if rep.Status != http.StatusOK || json.Unmarshal(rep.Body, &got) != nil || len(got) != 3 ||
		got["id"] != id || got["object"] != "task.deleted" || got["deleted"] != true {
		t.Errorf("DELETE /v1/tasks/%s: %d %s, want {id, object task.deleted, deleted true}", id, rep.Status, rep.Body)
	}
}

// TestTaskDelete: DELETE /v1/tasks/{id} as the video API's DELETE: a
// finished task has its upstream job deleted and is gone (404 for GET,
// cancel and a second DELETE; not listed); a running one is cancelled,
// its upstream job deleted and its capacity freed; another key's task is
// not found and stays.
func TestTaskDelete(t *testing.T) {
	t.Parallel()
	up := startVideoUpstream(t, mock.Config{})
	g := startGateway(t, "", videoCatalog(up.URL, taskOptions{Workers: 4}))
	_, key := g.createKey(t)
	_, other := g.createKey(t)

	done, _ := g.submitTask(t, key, taskBody("done", ""), "")
	if o := g.waitTerminal(t, key, []string{done.ID}, 20*time.Second)[done.ID]; o.Status != "succeeded" {
		t.Fatalf("task %s: %s %+v", done.ID, o.Status, o.Error)
	}
	doneJob := up.videoJobOf(t, done.ID)
	if err := up.Mock.Update(func(c *mock.Config) { c.JobDuration = time.Minute }); err != nil {
		t.Fatal(err)
	}
	running, _ := g.submitTask(t, key, taskBody("running", ""), "")
	waitFor(t, 10*time.Second, "a task to run upstream", func() bool { return g.getTask(t, key, running.ID).Status == "running" })
	runningJob := up.videoJobOf(t, running.ID)

	checkError(t, g.do(t, request{Method: http.MethodDelete, Path: "/v1/tasks/" + done.ID, Key: other}), http.StatusNotFound, "not_found")
	if o := g.getTask(t, key, done.ID); o.Status != "succeeded" || len(up.Deletes()) != 0 {
		t.Fatalf("after another key's DELETE: %s, upstream deletes %v", o.Status, up.Deletes())
	}

	g.deleteTask(t, key, done.ID)
	g.deleteTask(t, key, running.ID)
	if got := up.Deletes(); !slices.Equal(got, []string{doneJob, runningJob}) {
		t.Errorf("upstream deletes %v, want the finished task's job %s, then the running one's %s", got, doneJob, runningJob)
	}
	for _, id := range []string{done.ID, running.ID} {
		for _, r := range []request{
			{Method: http.MethodGet, Path: "/v1/tasks/" + id},
			{Method: http.MethodPost, Path: "/v1/tasks/" + id + "/cancel"},
			{Method: http.MethodDelete, Path: "/v1/tasks/" + id},
		} {
			r.Key = key
			checkError(t, g.do(t, r), http.StatusNotFound, "not_found")
		}
	}
	if got := g.statuses(t, key); len(got) != 0 {
		t.Errorf("after deleting every task the key lists %v", got)
	}
	g.waitNoLeases(t, 10*time.Second)
}

// TestTaskMaxWaitOnlyShortens: X-Weir-Max-Wait may shorten a task's wait,
// never lengthen it past tasks.max_wait.
func TestTaskMaxWaitOnlyShortens(t *testing.T) {
	t.Parallel()
	up := startVideoUpstream(t, mock.Config{JobDuration: 20 * time.Second})
	g := startGateway(t, "", videoCatalog(up.URL, taskOptions{Workers: 1, MaxWait: time.Second}))
	_, key := g.createKey(t)

	blocker, _ := g.submitTask(t, key, taskBody("blocker", ""), "")
	waitFor(t, 10*time.Second, "the blocker to run", func() bool { return g.getTask(t, key, blocker.ID).Status == "running" })
	rep := g.do(t, request{Path: "/v1/tasks", Key: key, Body: taskBody("patient", ""), Header: map[string]string{"X-Weir-Max-Wait": "1000000"}})
	var p taskObject
	if rep.Status != http.StatusAccepted || json.Unmarshal(rep.Body, &p) != nil {
		t.Fatalf("submit with a long max wait: %d %s", rep.Status, rep.Body)
	}
	waitFor(t, 10*time.Second, "the task to expire at tasks.max_wait", func() bool { return g.getTask(t, key, p.ID).Status == "expired" })
	g.cancelTask(t, key, blocker.ID)
}
