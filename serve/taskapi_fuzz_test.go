package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/keys"
	"github.com/weir-gateway/weir/provider/mock"
	"github.com/weir-gateway/weir/sqlite"
)

// FuzzTaskSubmit posts arbitrary bodies and headers to the two task
// submission APIs of a whole gateway (Main: SQLite, River, the engine, the
// mock's video API behind it). Whatever comes in, the answer is never a
// 500 (the recover middleware turns a panic into one); a refusal is a 4xx
// in the API's error shape and stores nothing; an acceptance stores one
// task (202) or returns the one an Idempotency-Key names (200).
func FuzzTaskSubmit(f *testing.F) {
	for _, seed := range []struct {
		video                             bool
		body, idem, cbURL, cbEvents, prio string
	}{
		{false, `{"model":"sora","input":{"prompt":"a weir"}}`, "", "", "", ""},
		{false, `{"model":"sora","input":{"prompt":"a weir"}}`, "k1", "", "", "-1"},
		{false, `{"model":"sora","input":{"prompt":"another"}}`, "k1", "", "", ""},
		{false, `{"model":"sora","input":{"prompt":"x"},"callback_url":"http://127.0.0.1/x","callback_events":["progress"]}`, "", "", "", ""},
		{false, `{"model":"sora","input":{"prompt":"x"},"callback_events":["nope"]}`, "", "", "", ""},
		{false, `{"model":"sora","input":"not an object"}`, "", "", "", ""},
		{false, `{"model":"gpt-4o","input":{}}`, "", "", "", ""},
		{false, `{"model":"sora","input":{}}`, "", "https://example.com/hook", "progress,other", "abc"},
		{true, `{"model":"sora","prompt":"a weir","seconds":"4"}`, "", "", "", ""},
		{true, `{"model":"sora"}`, "", "", "", ""},
		{true, `{"prompt":"no model"}`, "", "", "", ""},
		{true, `[]`, "", "", "", ""},
		{true, "\xff", "", "", "", ""},
		{true, `{"model":"sora","prompt":"x"}`, strings.Repeat("k", 300), "http://169.254.169.254/", "progress", "99999999999"},
	} {
		f.Add(seed.video, []byte(seed.body), seed.idem, seed.cbURL, seed.cbEvents, seed.prio)
	}
	g := startFuzzGateway(f)
	f.Fuzz(func(t *testing.T, video bool, body []byte, idem, cbURL, cbEvents, prio string) {
		path := "/v1/tasks"
		if video {
			path = "/v1/videos"
		}
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+g.secret)
		req.Header.Set("Content-Type", "application/json")
		for name, v := range map[string]string{
			"Idempotency-Key": idem, "X-Weir-Callback-URL": cbURL, "X-Weir-Callback-Events": cbEvents, "X-Weir-Priority": prio,
		} {
			if v != "" {
				req.Header.Set(name, v)
			}
		}
		rec := httptest.NewRecorder()
		var before, after int
		served := make(chan struct{})
		go func() {
			defer close(served)
			before = g.count(t)
			g.handler.ServeHTTP(rec, req)
			after = g.count(t)
		}()
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			var stacks bytes.Buffer
			_ = pprof.Lookup("goroutine").WriteTo(&stacks, 2)
			t.Fatalf("POST %s still unanswered after 10s:\n%s", path, stacks.String())
		}
		switch code := rec.Code; {
		case code == http.StatusAccepted:
			if after != before+1 {
				t.Fatalf("202 with %d tasks stored before and %d after", before, after)
			}
		case code == http.StatusOK:
			if after != before && !(video && after == before+1) {
				t.Fatalf("200 with %d tasks stored before and %d after", before, after)
			}
		case code >= 400 && code < 500:
			var e struct {
				Error struct {
					Message, Type string
					Code          *string
				}
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Message == "" || e.Error.Code == nil || *e.Error.Code == "" {
				t.Fatalf("%d answer not in the error shape: %q", code, rec.Body.String())
			}
			if after != before {
				t.Fatalf("refused with %d (%s), yet %d tasks stored before and %d after", code, *e.Error.Code, before, after)
			}
		default:
			t.Fatalf("POST %s answered %d: %s", path, code, rec.Body.String())
		}
	})
}

type fuzzGateway struct {
	handler http.Handler
	secret  string
	m       *Main
}

func (g *fuzzGateway) count(t *testing.T) int {
	var n int
	if err := g.m.DB.store.(*sqlite.DB).SQL().QueryRow(`SELECT count(*) FROM tasks`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// startFuzzGateway starts Main with one video model on the mock, whose
// jobs last an hour (tasks pile up queued behind one worker), and one key.
func startFuzzGateway(f *testing.F) *fuzzGateway {
	f.Helper()
	up := httptest.NewServer(mock.New(mock.Config{JobDuration: time.Hour}))
	f.Cleanup(up.Close)
	dir := f.TempDir()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
server:
  listen: "127.0.0.1:0"
  log_level: error
storage:
  path: %q
tasks:
  workers: 1
  webhook_secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
platforms:
  - name: vid
    base_url: %s/v1
platform_models:
  - name: vid/sora
    platform: vid
    upstream: sora-2
models:
  - name: sora
    kind: video
    candidates:
      - platform_model: vid/sora
  - name: gpt-4o
    kind: chat
    candidates:
      - platform_model: vid/sora
`, filepath.Join(dir, "weir.db"), up.URL)))
	if err != nil {
		f.Fatal(err)
	}
	m := &Main{Config: cfg}
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = m.Stop(ctx) })
	secret, prefix, hash, err := keys.Generate()
	if err != nil {
		f.Fatal(err)
	}
	if err := m.DB.KeyCreate(ctx, weir.APIKey{ID: "key_fuzz", Prefix: prefix, Hash: hash, CreatedAt: time.Now()}); err != nil {
		f.Fatal(err)
	}
	return &fuzzGateway{handler: m.API.Handler(), secret: secret, m: m}
}
