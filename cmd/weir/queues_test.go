package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/weir-gateway/weir/console"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/httpapi"
)

// TestPrintQueuesShadow: a scope in shadow is marked in the table, and
// what its limits would have done is listed under it; a key's only with
// --all.
func TestPrintQueuesShadow(t *testing.T) {
	t.Parallel()
	view := httpapi.QueueView{Scopes: []httpapi.ScopeView{
		{Name: "group:team", Limit: 8},
		{Name: "key:k1", Limit: 1, Shadow: true, Would: &httpapi.ShadowView{Waits: 2}},
		{Name: "pm:up/m", Limit: 1, InFlight: 5, Leases: 5, Shadow: true, Would: &httpapi.ShadowView{Waits: 4, Refusals: 1, Queued: 4}},
	}}
	var b strings.Builder
	printQueues(&b, view, false)
	out := b.String()
	for _, want := range []string{"pm:up/m (shadow)", "limits in shadow", "WOULD WAIT NOW"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var row string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "pm:up/m ") && !strings.Contains(line, "(shadow)") {
			row = line
		}
	}
	if f := strings.Fields(row); len(f) != 6 || f[1] != "true" || f[2] != "4" || f[3] != "4" || f[4] != "1" || f[5] != "0" {
		t.Errorf("shadow row of pm:up/m = %q; want true, 4 would wait now, 4 waits, 1 refusal, 0 timeouts", row)
	}
	if strings.Contains(out, "key:k1") || strings.Contains(out, "group:team (shadow)") {
		t.Errorf("output names a key scope without --all, or marks an enforced scope:\n%s", out)
	}
	b.Reset()
	printQueues(&b, view, true)
	if !strings.Contains(b.String(), "key:k1 (shadow)") {
		t.Errorf("--all output lacks the key's shadow scope:\n%s", b.String())
	}
}

// TestPrintQueuesCountsRequestsOnce: under the scopes, whose figures
// count a request under each scope it may be admitted by, the requests
// are counted once, and the output says why the two differ.
func TestPrintQueuesCountsRequestsOnce(t *testing.T) {
	t.Parallel()
	view := httpapi.QueueView{Scopes: []httpapi.ScopeView{
		{Name: "group:default", Waiting: 3},
		{Name: "key:k1", Waiting: 3},
		{Name: "node:n1/gpu", Limit: 4, InFlight: 4, Waiting: 3},
		{Name: "pm:up/chat", Limit: 1, InFlight: 1, Waiting: 3},
	}, Requests: &gateway.Requests{Waiting: 3, InFlight: 5}}
	var b strings.Builder
	printQueues(&b, view, false)
	for _, want := range []string{"3 waiting and 5 in flight in all, each request counted once", "counts under every scope it needs or may be", "weir queues --scope NAME"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}

// TestQueuesScopePages: weir queues --scope lists one page of a scope's
// waiters, each once, by position, with its key's name, and says how to
// get the next page; bad flags are refused before anything is asked.
func TestQueuesScopePages(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var asked []string
	askedSoFar := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(asked)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.RequestURI())
		mu.Unlock()
		if r.URL.Path != "/console/api/queue" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		deadline := int64(29_000)
		_ = json.NewEncoder(w).Encode(console.QueueAnswer{Scope: "pm:up/chat", Queued: 7, Offset: 2, Limit: 2, Held: 1,
			Stats: &gateway.ScopeView{Name: "pm:up/chat", Limit: 1, InFlight: 1},
			Waiters: []console.WaiterRow{
				{ID: "req_c/0", Position: 3, Tenant: "key_1", TenantName: "burst", Amount: 1, AgeMs: 1500, DeadlineMs: &deadline},
				{ID: "task_d", Position: 4, Tenant: "key_2", Amount: 1, AgeMs: 1200, Task: true},
			},
			Leases: []console.LeaseRow{{ID: "9", WaiterID: "req_a/0", Amount: 1}}})
	}))
	defer srv.Close()
	run := func(args ...string) (string, error) {
		cmd := queuesCmd()
		var out strings.Builder
		cmd.SetOut(&out)
		cmd.SetErr(io.Discard)
		cmd.SetArgs(append([]string{"--addr", srv.URL, "--token", "tok"}, args...))
		err := cmd.Execute()
		return out.String(), err
	}
	out, err := run("--scope", "pm:up/chat", "--offset", "2", "--limit", "2")
	if err != nil {
		t.Fatal(err)
	}
	if asked := askedSoFar(); len(asked) != 1 || asked[0] != "/console/api/queue?scope=pm%3Aup%2Fchat&offset=2&limit=2" {
		t.Errorf("asked %v", asked)
	}
	for _, want := range []string{"pm:up/chat: limit 1, 1 in flight, 7 waiting", "waiters 3–4 of 7", "burst (key_1)", "task_d (task)",
		"more: weir queues --scope pm:up/chat --offset 4 --limit 2", "held: 1 leases", "req_a/0"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range [][]string{{"--offset", "5"}, {"--scope", "s", "--limit", "0"}, {"--scope", "s", "--limit", "501"},
		{"--scope", "s", "--offset", "-1"}, {"--scope", "s", "--watch"}} {
		if _, err := run(bad...); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	if asked := askedSoFar(); len(asked) != 1 {
		t.Errorf("bad flags asked the server: %v", asked)
	}
}

// TestPrintFleetProtocol: the asked replica's fleet protocol is shown
// under the fleet's line, and a refusal says so with its reason.
func TestPrintFleetProtocol(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p    httpapi.ProtocolView
		want string
	}{
		{httpapi.ProtocolView{Version: 1, Min: 1, Max: 1}, "fleet protocol: 1 (its build speaks 1)\n"},
		{httpapi.ProtocolView{Version: 2, Min: 1, Max: 3}, "fleet protocol: 2 (its build speaks 1..3)\n"},
		{httpapi.ProtocolView{Min: 2, Max: 3, Refused: "replica b speaks fleet protocol 2..3 and leader a speaks 1"},
			"fleet protocol: REFUSED: replica b speaks fleet protocol 2..3 and leader a speaks 1\n"},
	} {
		var b strings.Builder
		printFleet(&b, &httpapi.FleetView{Replica: "b", Epoch: 3, Leader: "a", Synced: c.p.Version > 0, Protocol: &c.p})
		first, rest, _ := strings.Cut(b.String(), "\n")
		if !strings.HasPrefix(first, "fleet: epoch 3, leader a; asked replica b") || !strings.HasPrefix(rest, c.want) {
			t.Errorf("printFleet with %+v:\n%s\nwant the fleet's line, then %q", c.p, b.String(), c.want)
		}
	}
}
