package e2e

// Listings: GET /v1/videos as OpenAI's (cursor pages by video id, newest
// first by default) and GET /v1/tasks's filters and pages.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
)

// videoPage is GET /v1/videos's answer, with every field's raw JSON.
type videoPage struct {
	Object string `json:"object"`
	Data   []struct {
		ID     string `json:"id"`
		Object string `json:"object"`
		Model  string `json:"model"`
		Status string `json:"status"`
	} `json:"data"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
	HasMore bool    `json:"has_more"`
	raw     map[string]json.RawMessage
}

func (g *gateway) videoPage(t *testing.T, key, query string) videoPage {
	t.Helper()
	rep := g.do(t, request{Method: http.MethodGet, Path: "/v1/videos" + query, Key: key})
	var p videoPage
	if rep.Status != http.StatusOK || json.Unmarshal(rep.Body, &p) != nil || json.Unmarshal(rep.Body, &p.raw) != nil {
		t.Fatalf("GET /v1/videos%s: %d %s", query, rep.Status, rep.Body)
	}
	for _, f := range []string{"object", "data", "first_id", "last_id", "has_more"} {
		if _, ok := p.raw[f]; !ok {
			t.Errorf("GET /v1/videos%s: no %q field in %s", query, f, rep.Body)
		}
	}
	if p.Object != "list" {
		t.Errorf("GET /v1/videos%s: object %q, want list", query, p.Object)
	}
	return p
}

func (p videoPage) ids() []string {
	var ids []string
	for _, v := range p.Data {
		ids = append(ids, v.ID)
	}
	return ids
}

// TestVideoList: GET /v1/videos lists the caller's videos, not its
// generic tasks, not deleted ones and not another key's, newest first
// unless order=asc, in pages that follow the last id of the one before
// (also when that video was deleted meanwhile); bad parameters are 400s.
func TestVideoList(t *testing.T) {
	t.Parallel()
	up := startVideoUpstream(t, mock.Config{JobDuration: time.Minute})
	g := startGateway(t, "", videoCatalog(up.URL, taskOptions{Workers: 2}))
	_, key := g.createKey(t)
	_, other := g.createKey(t)
	_, empty := g.createKey(t)

	var videos []string // oldest first
	for i := range 6 {
		videos = append(videos, g.createVideo(t, key, fmt.Sprintf("v%d", i), ""))
		if i == 2 {
			g.submitTask(t, key, taskBody("not a video", ""), "") // a generic task in between
		}
	}
	theirs := g.createVideo(t, other, "theirs", "")
	g.deleteVideo(t, key, videos[4])
	live := slices.Delete(slices.Clone(videos), 4, 5)
	newest := slices.Clone(live)
	slices.Reverse(newest)

	p := g.videoPage(t, key, "")
	if !slices.Equal(p.ids(), newest) || p.HasMore || *p.FirstID != newest[0] || *p.LastID != newest[len(newest)-1] {
		t.Errorf("GET /v1/videos: %v, first %v, last %v, has_more %v; want %v newest first", p.ids(), p.FirstID, p.LastID, p.HasMore, newest)
	}
	for _, v := range p.Data {
		if v.Object != "video" || v.Model != videoModel || v.Status == "" {
			t.Errorf("listed video %+v", v)
		}
	}
	if p := g.videoPage(t, key, "?order=asc"); !slices.Equal(p.ids(), live) {
		t.Errorf("order=asc: %v, want %v", p.ids(), live)
	}

	// Pages of 2, both ways, by the last id of each page.
	for _, tc := range []struct {
		order string
		want  []string
	}{{"desc", newest}, {"asc", live}} {
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			if pages > len(videos) {
				t.Fatalf("order %s: still paging after %d pages: %v", tc.order, pages, got)
			}
			q := "?limit=2&order=" + tc.order
			if after != "" {
				q += "&after=" + after
			}
			p := g.videoPage(t, key, q)
			got = append(got, p.ids()...)
			if wantMore := len(got) < len(tc.want); p.HasMore != wantMore {
				t.Errorf("order %s: page %d has_more %v after %d of %d videos", tc.order, pages, p.HasMore, len(got), len(tc.want))
			}
			if !p.HasMore {
				break
			}
			after = *p.LastID
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("order %s, pages of 2: %v, want %v", tc.order, got, tc.want)
		}
	}
	// A page after a video deleted since still follows it.
	if p := g.videoPage(t, key, "?after="+videos[4]); !slices.Equal(p.ids(), []string{videos[3], videos[2], videos[1], videos[0]}) {
		t.Errorf("after a deleted video: %v", p.ids())
	}
	// Exactly a page: no more.
	if p := g.videoPage(t, key, fmt.Sprintf("?limit=%d", len(live))); len(p.Data) != len(live) || p.HasMore {
		t.Errorf("limit %d of %d videos: %d listed, has_more %v", len(live), len(live), len(p.Data), p.HasMore)
	}

	// Another key sees only its own; a key without videos an empty page
	// with null ids.
	if p := g.videoPage(t, other, ""); !slices.Equal(p.ids(), []string{theirs}) {
		t.Errorf("the other key lists %v, want %v", p.ids(), []string{theirs})
	}
	if p := g.videoPage(t, empty, ""); len(p.Data) != 0 || p.HasMore || string(p.raw["first_id"]) != "null" ||
		string(p.raw["last_id"]) != "null" || string(p.raw["data"]) != "[]" {
		t.Errorf("a key without videos: %s %s %s", p.raw["data"], p.raw["first_id"], p.raw["last_id"])
	}

	for _, tc := range []struct{ query, param string }{
		{"?limit=0", "limit"}, {"?limit=101", "limit"}, {"?limit=ten", "limit"},
		{"?order=newest", "order"},
		{"?after=video_nope", "after"},
		{"?after=" + theirs, "after"}, // another key's
	} {
		rep := g.do(t, request{Method: http.MethodGet, Path: "/v1/videos" + tc.query, Key: key})
		if e := checkError(t, rep, http.StatusBadRequest, "invalid_request"); e.Param == nil || *e.Param != tc.param {
			t.Errorf("GET /v1/videos%s: param %v (%s), want %s", tc.query, e.Param, e.Message, tc.param)
		}
	}
	tasks := g.listTasks(t, key)
	var generic string
	for _, o := range tasks {
		if !slices.Contains(videos, o.ID) {
			generic = o.ID
		}
	}
	rep := g.do(t, request{Method: http.MethodGet, Path: "/v1/videos?after=" + generic, Key: key})
	checkError(t, rep, http.StatusBadRequest, "invalid_request")
	checkError(t, g.do(t, request{Method: http.MethodGet, Path: "/v1/videos"}), http.StatusUnauthorized, "unauthorized")

	for _, o := range tasks {
		g.cancelTask(t, key, o.ID)
	}
	g.cancelTask(t, other, theirs)
}

// TestTaskListPages: GET /v1/tasks says has_more exactly (a page that
// holds the last task has none), and an unknown ?status= is a 400, not a
// server error.
func TestTaskListPages(t *testing.T) {
	t.Parallel()
	up := startVideoUpstream(t, mock.Config{JobDuration: time.Minute})
	g := startGateway(t, "", videoCatalog(up.URL, taskOptions{Workers: 1}))
	_, key := g.createKey(t)
	var ids []string
	for i := range 4 {
		o, _ := g.submitTask(t, key, taskBody(fmt.Sprintf("t%d", i), ""), "")
		ids = append(ids, o.ID)
	}
	type page struct {
		Data    []taskObject `json:"data"`
		HasMore bool         `json:"has_more"`
		After   string       `json:"after"`
	}
	get := func(query string) page {
		rep := g.do(t, request{Method: http.MethodGet, Path: "/v1/tasks" + query, Key: key})
		var p page
		if rep.Status != http.StatusOK || json.Unmarshal(rep.Body, &p) != nil {
			t.Fatalf("GET /v1/tasks%s: %d %s", query, rep.Status, rep.Body)
		}
		return p
	}
	if p := get("?limit=4"); len(p.Data) != 4 || p.HasMore || p.After != "" {
		t.Errorf("limit 4 of 4 tasks: %d listed, has_more %v, after %q; want all, no more", len(p.Data), p.HasMore, p.After)
	}
	p := get("?limit=3")
	if len(p.Data) != 3 || !p.HasMore || p.After == "" {
		t.Fatalf("limit 3 of 4 tasks: %d listed, has_more %v, after %q", len(p.Data), p.HasMore, p.After)
	}
	if p := get("?limit=3&after=" + p.After); len(p.Data) != 1 || p.Data[0].ID != ids[3] || p.HasMore {
		t.Errorf("the second page: %d tasks, has_more %v; want %s alone, no more", len(p.Data), p.HasMore, ids[3])
	}
	waitFor(t, 10*time.Second, "the first task to leave the queue", func() bool { return g.getTask(t, key, ids[0]).Status != "queued" })
	if p := get("?status=queued"); len(p.Data) != 3 || p.HasMore {
		t.Errorf("status=queued: %d tasks, want the 3 waiting behind the one running", len(p.Data))
	}
	for _, q := range []string{"?status=paused", "?status=QUEUED", "?status=deleted"} {
		rep := g.do(t, request{Method: http.MethodGet, Path: "/v1/tasks" + q, Key: key})
		if e := checkError(t, rep, http.StatusBadRequest, "invalid_request"); e.Param == nil || *e.Param != "status" {
			t.Errorf("GET /v1/tasks%s: param %v, want status", q, e.Param)
		}
	}
	for _, id := range ids {
		g.cancelTask(t, key, id)
	}
}

// TestTasksCLI: `weir tasks list` pages with --after as it says, `weir
// tasks delete` deletes, and a deleted task is no longer listed.
func TestTasksCLI(t *testing.T) {
	t.Parallel()
	up := startVideoUpstream(t, mock.Config{})
	g := startGateway(t, "", videoCatalog(up.URL, taskOptions{Workers: 2}))
	_, key := g.createKey(t)
	a, _ := g.submitTask(t, key, taskBody("a", ""), "")
	b, _ := g.submitTask(t, key, taskBody("b", ""), "")
	g.waitTerminal(t, key, []string{a.ID, b.ID}, 20*time.Second)
	weir := func(args ...string) string {
		return runWeir(t, append([]string{"tasks", "--addr", g.URL, "--key", key}, args...)...)
	}
	out := weir("list", "--limit", "1")
	if !strings.Contains(out, a.ID) || strings.Contains(out, b.ID) || !strings.Contains(out, "more: weir tasks list --after ") {
		t.Fatalf("list --limit 1:\n%s", out)
	}
	cursor := strings.TrimSpace(out[strings.Index(out, "--after ")+len("--after "):])
	if out := weir("list", "--limit", "1", "--after", cursor); !strings.Contains(out, b.ID) || strings.Contains(out, a.ID) || strings.Contains(out, "more:") {
		t.Errorf("list --after %s:\n%s", cursor, out)
	}
	if out := weir("delete", a.ID); strings.TrimSpace(out) != a.ID+" deleted" {
		t.Errorf("delete: %q", out)
	}
	if out := weir("list"); strings.Contains(out, a.ID) || !strings.Contains(out, b.ID) {
		t.Errorf("list after deleting %s:\n%s", a.ID, out)
	}
}
