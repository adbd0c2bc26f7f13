package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
)

// catalogBound is the fleet's stated bound for a published catalog to
// reach every replica (docs/fleet.md, "One catalog").
const catalogBound = time.Second

// gaugeOf reads one unlabelled metric of g's /metrics.
func gaugeOf(t *testing.T, g *gateway, name string) (float64, bool) {
	t.Helper()
	resp, err := client.Get(g.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return metric(string(b), name)
}

// logTime is when g logged its last line of msg, by its own clock.
func logTime(t *testing.T, g *gateway, msg string) time.Time {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := len(g.logs) - 1; i >= 0; i-- {
		if g.logs[i].msg != msg {
			continue
		}
		var rec struct {
			Time time.Time `json:"time"`
		}
		if err := json.Unmarshal([]byte(g.logs[i].raw), &rec); err != nil {
			t.Fatalf("log line %q: %v", g.logs[i].raw, err)
		}
		return rec.Time
	}
	t.Fatalf("no log line %q", msg)
	return time.Time{}
}

// floodPeak sends chat requests through every replica, 4 senders each,
// until the mock has served n more, and returns the mock's peak
// concurrency meanwhile; every answer must be a 200.
func floodPeak(t *testing.T, f *fleetRig, up *upstream, key string, n int64) int64 {
	t.Helper()
	up.Mock.ResetStats()
	load := newFleetLoad()
	stop := load.flood(f, f.ids(), key, 4)
	waitFor(t, 30*time.Second, "requests served", func() bool { return up.Mock.Stats().Requests >= n })
	stop()
	if statuses, errs := load.result(); len(errs) > 0 {
		t.Fatalf("answers %v; want every one 200 (first errors: %v)", statuses, errs[:min(len(errs), 5)])
	}
	return up.Mock.Stats().PeakInFlight
}

// TestFleetCatalogOneLimit: two replicas started with different catalog
// files — r0's platform model has concurrency 2, r1's 6 — enforce one
// limit, the fleet's first catalog's (r0's): the mock never serves more
// than 2 at once, and r1 reports its drift (weir_catalog_drift, /readyz,
// its log) while ready. r1's reload publishes its file as version 2:
// r0 takes it within the bound, and the fleet then serves 6 at once.
func TestFleetCatalogOneLimit(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{Latency: 50 * time.Millisecond})
	f := startFleet(t, 1, chatFleetCatalog(up.URL, 2))
	f.ready(t, "r0")
	f.catalog = chatFleetCatalog(up.URL, 6)
	f.start(t, "r1")
	f.ready(t, f.ids()...)
	r0, r1 := f.rs["r0"], f.rs["r1"]
	_, key := r0.createKey(t)

	if peak := floodPeak(t, f, up, key, 150); peak != 2 {
		t.Errorf("the mock's peak concurrency %d; want exactly the fleet's limit, 2 (r1's file says 6)", peak)
	}
	for id, want := range map[string]float64{"r0": 0, "r1": 1} {
		if v, ok := gaugeOf(t, f.rs[id], "weir_catalog_drift"); !ok || v != want {
			t.Errorf("%s's weir_catalog_drift = %v (shown: %v); want %v", id, v, ok, want)
		}
		if v, ok := gaugeOf(t, f.rs[id], "weir_catalog_version"); !ok || v != 1 {
			t.Errorf("%s's weir_catalog_version = %v (shown: %v); want 1", id, v, ok)
		}
	}
	resp, err := client.Get(r1.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "catalog drift") {
		t.Errorf("r1's /readyz: %d %q; want ready, saying it drifted", resp.StatusCode, body)
	}
	if r1.logCount("this replica's config file has another catalog than the fleet's: it serves the fleet's (reload, or weir apply, publishes a file's)") != 1 {
		t.Errorf("r1 did not log its drift once:\n%s", r1.log())
	}

	sent := time.Now()
	r1.hup(t)
	// The gauge moves before the log line is written, and the line
	// reaches the test through r0's stderr: both are waited for.
	waitFor(t, 10*time.Second, "r0 to take version 2", func() bool {
		v, _ := gaugeOf(t, r0, "weir_catalog_version")
		return v == 2 && r0.logCount("took the fleet's catalog") > 0
	})
	// From the SIGHUP, so r1's reading and publishing of its file count
	// too: the processes' clocks are this machine's.
	d := logTime(t, r0, "took the fleet's catalog").Sub(sent)
	t.Logf("r0 took version 2 %v after r1 was sent SIGHUP", d)
	if d > catalogBound {
		t.Errorf("r0 took version 2 %v after r1 was sent SIGHUP; want within %v", d, catalogBound)
	}
	if peak := floodPeak(t, f, up, key, 300); peak != 6 {
		t.Errorf("after r1's reload, the mock's peak concurrency %d; want exactly the new limit, 6", peak)
	}
	for id, want := range map[string]float64{"r0": 1, "r1": 0} {
		if v, ok := gaugeOf(t, f.rs[id], "weir_catalog_drift"); !ok || v != want {
			t.Errorf("after r1's reload, %s's weir_catalog_drift = %v (shown: %v); want %v", id, v, ok, want)
		}
	}
}
