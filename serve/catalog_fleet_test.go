package serve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/pgtest"
)

// oneModelFile is a fleet config file on dsn whose model chat has one
// candidate, platform model pm (upstream model upstream) of concurrency
// 1, on up.
func oneModelFile(dsn, up, pm, upstream string) []byte {
	return fmt.Appendf(nil, `server:
  listen: 127.0.0.1:0
storage:
  driver: postgres
  dsn: %q
platforms:
  - name: up
    base_url: %s/v1
platform_models:
  - name: %s
    platform: up
    upstream: %s
    concurrency: 1
models:
  - name: chat
    kind: chat
    candidates:
      - platform_model: %s
`, dsn, up, pm, upstream, pm)
}

// startFleetMain starts a replica id of the fleet the config file at
// path names, stopped when the test ends.
func startFleetMain(t *testing.T, path, id string) *Main {
	t.Helper()
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Storage.Path = filepath.Join(t.TempDir(), "weir.db")
	cfg.Fleet.Replica = id
	m := &Main{ConfigPath: path, Config: cfg, Logger: slog.New(slog.DiscardHandler)}
	t.Cleanup(func() { _ = m.Stop(context.Background()) })
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return m
}

// startLedFleet starts replicas r0 and r1 of the fleet the config file
// at path names, waits for both to be ready, and returns the one that
// leads and the other.
func startLedFleet(t *testing.T, path string) (leader, other *Main) {
	t.Helper()
	r0 := startFleetMain(t, path, "r0")
	r1 := startFleetMain(t, path, "r1")
	ready, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for _, r := range []*Main{r0, r1} {
		if err := r.Member.Ready(ready); err != nil {
			t.Fatal(err)
		}
	}
	if _, leading := r1.Member.Term(); leading {
		return r1, r0
	}
	return r0, r1
}

// chatThrough sends a chat request of key secret through m, and sends
// its status on the returned channel.
func chatThrough(t *testing.T, m *Main, secret string) <-chan int {
	t.Helper()
	ch := make(chan int, 1)
	go func() {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+m.Addr()+"/v1/chat/completions",
			bytes.NewReader([]byte(`{"model":"chat","messages":[{"role":"user","content":"hi"}]}`)))
		if err != nil {
			ch <- 0
			return
		}
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			ch <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		ch <- resp.StatusCode
	}()
	return ch
}

// leaderHolds polls until the fleet's leader, asked through m, shows
// scope with queued waiters: a state of the leader's, which no event of
// m's announces.
func leaderHolds(t *testing.T, m *Main, scope string, queued int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := m.Engine.Scope(t.Context(), scope)
		if err == nil && st.Queued == queued {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s at the leader: %+v, %v; want %d queued", scope, st, err, queued)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFleetCatalogMovesWaitersBeforeRetiring: a version that replaces
// the one platform model of a model is taken by the replica that
// publishes it, while a request through another replica that has not
// taken it yet waits on the platform model it removes. The fleet keeps
// that platform model's scope, with its limit and the request queued,
// until the other replica takes the version: then the request is moved
// to the new platform model and served there. The scope is retired once
// the request admitted on it before the version ends.
func TestFleetCatalogMovesWaitersBeforeRetiring(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	dsn := pgtest.Schema(t)
	up := startHeldUpstream(t, "slow")
	path := filepath.Join(t.TempDir(), "weir.yaml")
	if err := os.WriteFile(path, oneModelFile(dsn, up.URL, "up/slow", "slow"), 0o600); err != nil {
		t.Fatal(err)
	}
	r0 := startFleetMain(t, path, "r0")
	r1 := startFleetMain(t, path, "r1")
	t.Cleanup(up.releaseAll)
	ctx := t.Context()
	secret, err := CreateKey(ctx, r0.DB, &weir.APIKey{Name: "k", Group: "default"})
	if err != nil {
		t.Fatal(err)
	}
	slow := weir.PlatformModelScope("up/slow")

	// A request through r0 holds up/slow's one slot; one through r1
	// waits for it.
	first := chatThrough(t, r0, secret)
	up.arrive(t, "slow")
	second := chatThrough(t, r1, secret)
	leaderHolds(t, r1, slow, 1)

	// r0 publishes a version that serves chat on up/fast alone, while r1
	// is held from taking it.
	r1.catalog.mu.Lock()
	held := true
	defer func() {
		if held {
			r1.catalog.mu.Unlock()
		}
	}()
	v, published, err := r0.catalog.PublishFile(ctx, oneModelFile(dsn, up.URL, "up/fast", "fast"), "test")
	if err != nil || !published {
		t.Fatalf("publish version 2: %+v, %v, %v", v, published, err)
	}
	st, err := r0.Engine.Scope(ctx, slow)
	if err != nil || st.Queued != 1 || st.Config.Limit != 1 {
		t.Errorf("up/slow once r0 took version 2 and r1 has not: %+v, %v; want it kept, limit 1, r1's request queued", st, err)
	}
	select {
	case code := <-second:
		t.Fatalf("r1's request ended %d before r1 took version 2; want it still waiting", code)
	default:
	}

	// r1 takes version 2 on its notice: its request moves to up/fast.
	held = false
	r1.catalog.mu.Unlock()
	select {
	case code := <-second:
		if code != http.StatusOK || up.count("fast") != 1 {
			t.Errorf("r1's request: %d, %d calls of up/fast; want 200, served by up/fast", code, up.count("fast"))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("r1's request was not served after r1 took version 2")
	}
	taken(r1.catalog)
	if st := r1.catalog.State(); st.Version != 2 {
		t.Errorf("r1 serves version %d; want 2", st.Version)
	}
	if st, err := r0.Engine.Scope(ctx, slow); err != nil || st.Leases != 1 || st.Queued != 0 {
		t.Errorf("up/slow once every replica serves version 2, r0's request on it: %+v, %v; want it kept for that request's slot alone", st, err)
	}
	up.releaseAll()
	if code := <-first; code != http.StatusOK {
		t.Errorf("the request admitted on up/slow before version 2: %d; want 200", code)
	}
	awaitScopeGone(t, "up/slow once its last request ended", func() error {
		r0.catalog.catchUp(ctx)
		_, err := r0.Engine.Scope(ctx, slow)
		return err
	})
}
