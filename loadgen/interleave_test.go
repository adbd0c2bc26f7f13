package loadgen

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRunInterleaved drives three targets on one open loop on a fake
// clock: each gets a third of the requests, whole turns of the warm-up
// and of the window, its own stream share, and a Result of its own; no
// target is always first in a turn.
func TestRunInterleaved(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		seen  []string // target of each request, in arrival order
		count = map[string]int{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.URL.Path)
		count[r.URL.Path+" "+string(b)]++
		mu.Unlock()
		if r.URL.Path == "/c" {
			http.Error(w, "no", http.StatusTeapot)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	target := func(path string) Target {
		return Target{URL: srv.URL + path, Body: []byte("plain"), StreamBody: []byte("stream")}
	}
	results, err := RunInterleaved(context.Background(), Config{
		Rate:           1000,
		Warmup:         20 * time.Millisecond,
		Duration:       100 * time.Millisecond,
		MaxInFlight:    1, // one at a time: arrival order is the order dealt
		StreamFraction: 0.2,
		Clock:          newFakeClock(),
		Client:         srv.Client(),
	}, []Target{target("/a"), target("/b"), target("/c")})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 3 {
		t.Fatalf("%d results, want 3", len(results))
	}
	// 21 warm-up requests (20 rounded up to whole turns) and 99
	// measured (the 120 due in all less those): 40 to each target, 33
	// of them measured.
	for _, path := range []string{"/a", "/b", "/c"} {
		mu.Lock()
		plain, stream := count[path+" plain"], count[path+" stream"]
		mu.Unlock()
		if plain+stream != 40 || stream != 8 {
			t.Errorf("%s got %d plain and %d streaming requests, want 40 with 8 streaming", path, plain, stream)
		}
	}
	for i, r := range results {
		ok := 33
		if i == 2 {
			ok = 0
		}
		if r.Requests != 33 || r.Succeeded != ok || r.Rate != 1000.0/3 || !r.Open {
			t.Errorf("target %d: requests %d, succeeded %d, rate %v, open %v; want 33, %d, 333.3, true", i, r.Requests, r.Succeeded, r.Rate, r.Open, ok)
		}
	}
	if results[2].Errors["HTTP 418"] != 33 {
		t.Errorf("target /c's errors %v, want 33 HTTP 418", results[2].Errors)
	}
	if results[0].Process != results[1].Process {
		t.Errorf("targets' process stats differ: %+v, %+v", results[0].Process, results[1].Process)
	}
	mu.Lock()
	defer mu.Unlock()
	firsts := map[string]int{}
	for i := 0; i+3 <= len(seen); i += 3 {
		turn := strings.Join(seen[i:i+3], "")
		if len(turn) != 6 || !strings.Contains(turn, "/a") || !strings.Contains(turn, "/b") || !strings.Contains(turn, "/c") {
			t.Fatalf("turn %d went to %q, want each target once", i/3, seen[i:i+3])
		}
		firsts[seen[i]]++
	}
	if len(firsts) != 3 {
		t.Errorf("the targets first in a turn: %v, want all three", firsts)
	}
}

func TestRunInterleavedRejects(t *testing.T) {
	t.Parallel()
	ok := Target{URL: "http://x"}
	for _, tc := range []struct {
		cfg     Config
		targets []Target
		want    string
	}{
		{Config{Rate: 10, Duration: time.Second}, nil, "no targets"},
		{Config{Duration: time.Second}, []Target{ok, ok}, "open loop"},
		{Config{Rate: 10, Duration: time.Second}, []Target{ok, {}}, "target 1: loadgen: no target URL"},
		{Config{Rate: 10}, []Target{ok, ok}, "duration"},
	} {
		if _, err := RunInterleaved(context.Background(), tc.cfg, tc.targets); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("RunInterleaved(%+v, %d targets): %v, want an error saying %q", tc.cfg, len(tc.targets), err, tc.want)
		}
	}
}
