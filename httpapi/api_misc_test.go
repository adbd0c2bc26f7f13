package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/provider/mock"
	"github.com/weir-gateway/weir/router"
)

// TestModels: GET /v1/models lists the models the key may use, sorted,
// and GET /v1/models/{model} answers those and 404s the rest, whether
// unknown or not allowed.
func TestModels(t *testing.T) {
	t.Parallel()
	cat := weir.Catalog{
		Platforms:      []weir.Platform{{Name: "up", Kind: "openai", BaseURL: "UP"}},
		PlatformModels: []weir.PlatformModel{{Name: "up/m", Platform: "up", Upstream: "gpt-4o-mini"}},
		Models: []weir.Model{
			{Name: "m", Kind: weir.KindChat, Candidates: []weir.Candidate{{PlatformModel: "up/m", Weight: 1}}},
			{Name: "a/b", Kind: weir.KindChat, Candidates: []weir.Candidate{{PlatformModel: "up/m", Weight: 1}}},
		},
	}
	b := setup(t, setupOpts{catalog: &cat})
	limited := b.newKey(t, weir.APIKey{Models: []string{"a/b", "gone"}})
	type list struct {
		Object string `json:"object"`
		Data   []struct {
			ID, Object, OwnedBy string
		} `json:"data"`
	}
	ids := func(l list) string {
		var s []string
		for _, d := range l.Data {
			s = append(s, d.ID)
		}
		return strings.Join(s, ",")
	}
	if l := callAs[list](t, b, http.StatusOK, http.MethodGet, "/v1/models", b.key, "", nil); l.Object != "list" || ids(l) != "a/b,m" {
		t.Errorf("all models: %+v", l)
	}
	if l := callAs[list](t, b, http.StatusOK, http.MethodGet, "/v1/models", limited, "", nil); ids(l) != "a/b" {
		t.Errorf("an allow-list's models: %+v", l)
	}
	resp, body := b.call(t, http.MethodGet, "/v1/models", "sk-wrong", "", nil)
	wantError(t, resp, body, http.StatusUnauthorized, weir.CodeUnauthorized, "")

	type model struct{ ID, Object string }
	if m := callAs[model](t, b, http.StatusOK, http.MethodGet, "/v1/models/a/b", limited, "", nil); m.ID != "a/b" || m.Object != "model" {
		t.Errorf("GET a/b: %+v", m)
	}
	for _, c := range []struct{ key, model string }{{limited, "m"}, {limited, "gone"}, {b.key, "nonesuch"}} {
		resp, body := b.call(t, http.MethodGet, "/v1/models/"+c.model, c.key, "", nil)
		wantError(t, resp, body, http.StatusNotFound, weir.CodeNotFound, "model")
	}
	resp, body = b.call(t, http.MethodGet, "/v1/models/m", "", "", nil)
	wantError(t, resp, body, http.StatusUnauthorized, weir.CodeUnauthorized, "")
}

// TestReadyz: ready once a catalog is applied and Ready agrees; 503 with
// the reason otherwise. /healthz answers regardless.
func TestReadyz(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var notReady error
	b := setup(t, setupOpts{deps: func(d *Deps) {
		d.Ready = func() error { mu.Lock(); defer mu.Unlock(); return notReady }
	}})
	if resp, body := b.call(t, http.MethodGet, "/readyz", "", "", nil); resp.StatusCode != http.StatusOK || string(body) != "ready\n" {
		t.Errorf("ready: %d %q", resp.StatusCode, body)
	}
	mu.Lock()
	notReady = errors.New("store unreachable")
	mu.Unlock()
	if resp, body := b.call(t, http.MethodGet, "/readyz", "", "", nil); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "store unreachable") {
		t.Errorf("not ready: %d %q", resp.StatusCode, body)
	}

	bare := New(Config{}, Deps{Gateway: gateway.New(gateway.Config{}, gateway.Deps{Router: router.New(router.Options{})})})
	for path, want := range map[string]int{"/readyz": http.StatusServiceUnavailable, "/healthz": http.StatusOK} {
		w := httptest.NewRecorder()
		bare.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != want {
			t.Errorf("no catalog: %s %d, want %d", path, w.Code, want)
		}
	}
}

// TestErrorTable: every code is written with its status, OpenAI type and
// code, its param (null when none) and Retry-After in whole seconds
// rounded up; an unknown code is a 500.
func TestErrorTable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code   weir.Code
		status int
		typ    string
	}{
		{weir.CodeInvalidRequest, 400, "invalid_request_error"},
		{weir.CodeUnauthorized, 401, "authentication_error"},
		{weir.CodeForbidden, 403, "permission_error"},
		{weir.CodeNotFound, 404, "not_found_error"},
		{weir.CodeRequestTimeout, 408, "invalid_request_error"},
		{weir.CodeIdempotencyKeyReused, 422, "invalid_request_error"},
		{weir.CodePayloadTooLarge, 413, "invalid_request_error"},
		{weir.CodeRateLimited, 429, "rate_limit_error"},
		{weir.CodeQueueFull, 429, "rate_limit_error"},
		{weir.CodeQueueTimeout, 503, "server_error"},
		{weir.CodeNoCandidate, 503, "server_error"},
		{weir.CodeUpstreamError, 502, "server_error"},
		{weir.CodeUpstreamTimeout, 504, "server_error"},
		{weir.CodeInternal, 500, "server_error"},
		{weir.Code("no_such_code"), 500, "server_error"},
	} {
		for _, ra := range []time.Duration{0, 1500 * time.Millisecond} {
			w := httptest.NewRecorder()
			e := &apiError{Code: tc.code, Message: "msg", RetryAfter: ra}
			if ra > 0 {
				e.Param = "p"
			}
			writeError(w, e)
			var got map[string]map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			d := got["error"]
			wantRA, wantParam := "", any(nil)
			if ra > 0 {
				wantRA, wantParam = "2", "p"
			}
			if w.Code != tc.status || tc.code.Status() != tc.status || d["type"] != tc.typ || d["code"] != string(tc.code) ||
				d["message"] != "msg" || d["param"] != wantParam || w.Header().Get("Retry-After") != wantRA ||
				w.Header().Get("Content-Type") != "application/json" {
				t.Errorf("%s (retry after %v): %d %v Retry-After %q, want %d %s", tc.code, ra, w.Code, d, w.Header().Get("Retry-After"), tc.status, tc.typ)
			}
			if _, present := d["param"]; !present {
				t.Errorf("%s: no param field", tc.code)
			}
		}
	}
	if got := errorf(weir.CodeNotFound, "", "gone").Error(); got != "not_found: gone" {
		t.Errorf("Error() = %q", got)
	}
}

// TestAdminQueuesShowsScopes: /admin/queues reports each scope's limit,
// what holds it and what waits for it.
func TestAdminQueuesShowsScopes(t *testing.T) {
	t.Parallel()
	b := taskSetup(t, setupOpts{cfg: Config{AdminLoopback: true}, mock: mock.Config{JobDuration: time.Hour},
		vlimits: weir.Limits{Concurrency: 1, QueueLimit: 10}})
	first := callAs[taskObject](t, b, http.StatusAccepted, http.MethodPost, "/v1/tasks", b.key, `{"model":"v","input":{"prompt":"one"}}`, nil)
	b.waitTask(t, first.ID, weir.TaskRunning)
	callAs[taskObject](t, b, http.StatusAccepted, http.MethodPost, "/v1/tasks", b.key, `{"model":"v","input":{"prompt":"two"}}`, nil)
	q := callAs[QueueView](t, b, http.StatusOK, http.MethodGet, "/admin/queues", "", "", nil)
	var found bool
	for _, sc := range q.Scopes {
		if sc.Name == weir.PlatformModelScope("up/v") {
			found = true
			if sc.Limit != 1 || sc.InFlight != 1 || sc.Waiting != 1 {
				t.Errorf("scope %+v, want limit 1, 1 in flight, 1 waiting", sc)
			}
		}
	}
	if !found {
		t.Errorf("no scope %s in %+v", weir.PlatformModelScope("up/v"), q.Scopes)
	}
	// Each task counts once, though it waits on its key's, its group's,
	// the platform model's and the workers' scopes.
	if q.Requests == nil || q.Requests.Waiting != 1 || q.Requests.InFlight != 1 {
		t.Errorf("requests %+v; want 1 waiting and 1 in flight", q.Requests)
	}
}

// TestKeyStoreDown: while the key store cannot answer, a key the gateway
// looked up recently still authenticates, and one it never saw is a 503
// store_unavailable with Retry-After (a retry will do), not a 500 or a
// 401.
func TestKeyStoreDown(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	resp, body := b.call(t, http.MethodGet, "/v1/models", b.key, "", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/models: %d %s", resp.StatusCode, body)
	}
	_ = b.db.Close()
	resp, body = b.call(t, http.MethodGet, "/v1/models", b.key, "", nil)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a key seen before the store went down: %d %s; want 200", resp.StatusCode, body)
	}
	resp, body = b.call(t, http.MethodGet, "/v1/models", "sk-never-seen", "", nil)
	wantError(t, resp, body, http.StatusServiceUnavailable, weir.CodeStoreUnavailable, "")
	if got := resp.Header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q; want 1", got)
	}
}
