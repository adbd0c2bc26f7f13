package storetest

import (
	"testing"

	"github.com/weir-gateway/weir"
)

// testTaskClearUpstream: ClearUpstream empties the upstream id, its site
// and the result whatever the update's own fields say, and applies the rest, so a
// task whose upstream job failed can go back to the queue for a new one.
func testTaskClearUpstream(t *testing.T, s taskStore) {
	k := newKey(1)
	mustCreate(t, s, k)
	task := newTask(1, k.ID)
	createTasks(t, s, &task)
	if !update(t, s, task.ID, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskRunning,
		UpstreamID: "job_1", UpstreamSite: "site_1", Progress: ptr(40), Result: []byte(`{"status":"failed"}`)}) {
		t.Fatal("task to running did not apply")
	}
	if !update(t, s, task.ID, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskRunning}, Status: weir.TaskQueued,
		ClearUpstream: true, UpstreamID: "ignored", UpstreamSite: "ignored", Progress: ptr(0), Attempts: ptr(1), Candidate: ptr(-1)}) {
		t.Fatal("the retry update did not apply")
	}
	got := getTask(t, s, task.ID)
	if got.Status != weir.TaskQueued || got.UpstreamID != "" || got.UpstreamSite != "" || got.Result != nil || got.Progress != 0 || got.Attempts != 1 || got.Candidate != -1 {
		t.Errorf("after ClearUpstream: status %s, upstream %q, result %q, progress %d, attempts %d, candidate %d; want queued, empty, none, 0, 1, -1",
			got.Status, got.UpstreamID, got.Result, got.Progress, got.Attempts, got.Candidate)
	}
	// Without ClearUpstream, an empty UpstreamID leaves the stored one.
	if !update(t, s, task.ID, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskRunning, UpstreamID: "job_2", UpstreamSite: "site_2"}) ||
		!update(t, s, task.ID, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskRunning}, Status: weir.TaskRunning}) {
		t.Fatal("updates did not apply")
	}
	if got := getTask(t, s, task.ID); got.UpstreamID != "job_2" || got.UpstreamSite != "site_2" {
		t.Errorf("upstream id %q, site %q after an update that did not clear them, want job_2, site_2", got.UpstreamID, got.UpstreamSite)
	}
}
