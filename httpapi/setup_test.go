package httpapi

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/keys"
	"github.com/weir-gateway/weir/provider/mock"
	"github.com/weir-gateway/weir/riverjob"
	"github.com/weir-gateway/weir/router"
	"github.com/weir-gateway/weir/sqlite"
	"github.com/weir-gateway/weir/task"
)

// testBundle is a whole API in one process: an engine, a temp SQLite
// store, a mock upstream on a real listener, and the API behind httptest.
type testBundle struct {
	srv    *Server
	gw     *gateway.Service
	http   *httptest.Server
	engine *admission.Memory
	db     *sqlite.DB
	mock   *mock.Server
	up     *httptest.Server
	// key is the secret of an active key of the default group.
	key string
	// tasks is the task service, with setupOpts.tasks.
	tasks *task.Service
}

// setupOpts changes what setup builds.
type setupOpts struct {
	cfg Config
	// gwCfg is the gateway service's Config.
	gwCfg gateway.Config
	deps  func(*Deps)
	// gwDeps, if set, changes the gateway service's Deps.
	gwDeps func(*gateway.Deps)
	mock   mock.Config
	limits weir.Limits // of the platform model "up/m"
	// catalog, if set, replaces the default catalog; "UP" in a platform's
	// BaseURL is replaced with the mock's URL and /v1, "ROOT" with its
	// URL alone (an azure platform's resource endpoint).
	catalog *weir.Catalog
	// clock, if set, is the engine's and the API's clock.
	clock clock.Clock
	// observer, if set, sees the engine's events.
	observer admission.Observer
	// upstream, if set, wraps the mock: what the API reaches is
	// upstream(mock).
	upstream func(http.Handler) http.Handler
	// tasks, if set, runs a task service (task.New on the bundle's store,
	// the gateway its planner) with this Config, and the default catalog
	// gains a video model "v" on the platform model "up/v" (the mock's
	// video API).
	tasks *task.Config
	// hooks are the task service's webhooks, with tasks.
	hooks task.Webhooks
	// vlimits are the limits of "up/v", with tasks.
	vlimits weir.Limits
	// translateResponses sends the default catalog's platform Responses
	// requests translated to Chat Completions, not passed through.
	translateResponses bool
}

// setup serves a catalog of one platform ("up", the mock), one platform
// model ("up/m") and one chat model ("m"), with a key for it.
func setup(t testing.TB, o setupOpts) *testBundle {
	t.Helper()
	ctx := t.Context()
	b := &testBundle{}
	b.mock = mock.New(o.mock)
	var up http.Handler = b.mock
	if o.upstream != nil {
		up = o.upstream(b.mock)
	}
	b.up = httptest.NewServer(up)
	t.Cleanup(b.up.Close)
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "weir.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	b.db = db
	b.engine = admission.NewMemory(admission.Options{Clock: o.clock, Observer: o.observer})
	t.Cleanup(b.engine.Close)
	deps := Deps{Clock: o.clock, Spend: db}
	if o.deps != nil {
		o.deps(&deps)
	}
	gwDeps := gateway.Deps{Engine: b.engine, Keys: db, Router: router.New(router.Options{}), Logger: deps.Logger, Clock: o.clock, Responses: db}
	if o.gwDeps != nil {
		o.gwDeps(&gwDeps)
	}
	b.gw = gateway.New(o.gwCfg, gwDeps)
	deps.Gateway, deps.Queues, deps.Responses = b.gw, b.gw, b.gw
	if o.tasks != nil {
		if err := riverjob.Migrate(ctx, db); err != nil {
			t.Fatal(err)
		}
		tc := *o.tasks
		if tc.Clock == nil {
			tc.Clock = o.clock
		}
		if tc.FetchPollInterval == 0 {
			tc.FetchPollInterval = 10 * time.Millisecond
		}
		if tc.PollMin == 0 {
			tc.PollMin = 10 * time.Millisecond
		}
		tc.SoleRunner = true
		b.tasks, err = task.New(tc, task.Deps[*sql.Tx]{Store: db, Engine: b.engine, Planner: b.gw, Webhooks: o.hooks, Logger: deps.Logger,
			Tracing: deps.Tracing})
		if err != nil {
			t.Fatal(err)
		}
		deps.Tasks = gateway.NewTasks(b.gw, b.tasks)
	}
	b.srv = New(o.cfg, deps)
	cat := weir.Catalog{
		Platforms:      []weir.Platform{{Name: "up", Kind: "openai", BaseURL: "UP", TranslateResponses: o.translateResponses}},
		PlatformModels: []weir.PlatformModel{{Name: "up/m", Platform: "up", Upstream: "gpt-4o-mini", Limits: o.limits}},
		Models:         []weir.Model{{Name: "m", Kind: weir.KindChat, Candidates: []weir.Candidate{{PlatformModel: "up/m", Weight: 1}}}},
	}
	if o.tasks != nil {
		cat.PlatformModels = append(cat.PlatformModels, weir.PlatformModel{Name: "up/v", Platform: "up", Upstream: "sora-2", Limits: o.vlimits})
		cat.Models = append(cat.Models, weir.Model{Name: "v", Kind: weir.KindVideo, Candidates: []weir.Candidate{{PlatformModel: "up/v", Weight: 1}}})
	}
	if o.catalog != nil {
		cat = *o.catalog
	}
	for i := range cat.Platforms {
		cat.Platforms[i].BaseURL = strings.ReplaceAll(cat.Platforms[i].BaseURL, "UP", b.up.URL+"/v1")
		cat.Platforms[i].BaseURL = strings.ReplaceAll(cat.Platforms[i].BaseURL, "ROOT", b.up.URL)
	}
	if err := b.gw.Apply(ctx, cat, ""); err != nil {
		t.Fatal(err)
	}
	b.http = httptest.NewServer(b.srv.Handler())
	t.Cleanup(b.http.Close)
	if b.tasks != nil {
		if err := b.tasks.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := b.tasks.Stop(stop); err != nil {
				t.Errorf("task service stop: %v", err)
			}
		})
	}
	b.key = b.newKey(t, weir.APIKey{})
	return b
}

// newKey stores k (its id, name and hash filled in) and returns its secret.
func (b *testBundle) newKey(t testing.TB, k weir.APIKey) string {
	t.Helper()
	secret, prefix, hash, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if k.ID == "" {
		k.ID = "key_" + prefix
	}
	if k.Name == "" {
		k.Name = k.ID
	}
	k.Prefix, k.Hash, k.CreatedAt = prefix, hash, time.Now()
	if err := b.db.KeyCreate(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	return secret
}

// post sends body to path with the bundle's key.
func (b *testBundle) post(t testing.TB, path, body string, h http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.http.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+b.key)
	for k, vs := range h {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// TestSetupServesChat checks the bundle itself: a chat request through it
// reaches the mock and comes back 200.
func TestSetupServesChat(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	resp := b.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if got := b.mock.Stats().Requests; got != 1 {
		t.Fatalf("mock saw %d requests, want 1", got)
	}
}
