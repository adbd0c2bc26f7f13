package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// getWith GETs path from the bundle's API with the given Authorization.
func (b *testBundle) getWith(t testing.TB, path, authorization string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, b.http.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// TestAdminToken: with an admin token set, /admin answers the token and
// nothing else: not a prefix of it, not a longer string, not an API key,
// not a loopback client without it.
func TestAdminToken(t *testing.T) {
	t.Parallel()
	const token = "adm_s3cret-token"
	b := setup(t, setupOpts{cfg: Config{AdminToken: token}})
	for _, tc := range []struct {
		auth string
		want int
	}{
		{"Bearer " + token, http.StatusOK},
		{"bearer " + token, http.StatusOK},
		{"", http.StatusUnauthorized},
		{"Bearer ", http.StatusUnauthorized},
		{"Bearer " + token[:len(token)-1], http.StatusUnauthorized},
		{"Bearer " + token + "x", http.StatusUnauthorized},
		{"Bearer " + b.key, http.StatusUnauthorized},
		{token, http.StatusUnauthorized},
	} {
		if resp := b.getWith(t, "/admin/queues", tc.auth); resp.StatusCode != tc.want {
			t.Errorf("Authorization %q: status %d, want %d", tc.auth, resp.StatusCode, tc.want)
		}
	}
}

// TestAdminLoopbackTrust: with no admin token, the admin API lets in
// loopback clients only when AdminLoopback says so, and otherwise answers
// 403 saying how to open it; a client from elsewhere never gets in.
func TestAdminLoopbackTrust(t *testing.T) {
	t.Parallel()
	closed := setup(t, setupOpts{})
	resp := closed.getWith(t, "/admin/queues", "")
	if e := apiErrorOf(t, resp); resp.StatusCode != http.StatusForbidden || !strings.Contains(e.Message, "admin_loopback") || !strings.Contains(e.Message, "admin_token") {
		t.Errorf("no token, no loopback trust: status %d, %+v; want 403 saying how to enable it", resp.StatusCode, e)
	}

	open := setup(t, setupOpts{cfg: Config{AdminLoopback: true}})
	if resp := open.getWith(t, "/admin/queues", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("loopback client, loopback trusted: status %d", resp.StatusCode)
	}
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/admin/queues", nil)
	r.RemoteAddr = "203.0.113.7:50000"
	open.srv.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusForbidden {
		t.Errorf("remote client, loopback trusted: status %d, want 403", w.Code)
	}
}

// TestAdminLoopbackTrustNamesLoopback: while loopback alone lets a
// client in, a request must name a loopback host (or the public one):
// another site's page whose name resolves to 127.0.0.1 (DNS rebinding)
// names its own and is refused, in the API's error shape, on the admin
// API and /metrics behind it. A request bearing the admin token may name
// any host.
func TestAdminLoopbackTrustNamesLoopback(t *testing.T) {
	t.Parallel()
	metrics := func(d *Deps) {
		d.MetricsHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "weir_up 1\n") })
	}
	open := setup(t, setupOpts{cfg: Config{AdminLoopback: true, MetricsAuth: true, PublicHost: "weir.example.com"}, deps: metrics})
	const token = "adm_rebind"
	withToken := setup(t, setupOpts{cfg: Config{AdminToken: token}})
	_, port, _ := strings.Cut(strings.TrimPrefix(open.http.URL, "http://"), ":")
	_, tokenPort, _ := strings.Cut(strings.TrimPrefix(withToken.http.URL, "http://"), ":")
	get := func(b *testBundle, path, host, auth string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, b.http.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	for _, c := range []struct {
		host string
		want int
	}{
		{"evil.example:" + port, http.StatusForbidden},
		{"evil.example", http.StatusForbidden},
		{"127.0.0.1.nip.io:" + port, http.StatusForbidden},
		{"0.0.0.0:" + port, http.StatusForbidden},
		{"127.0.0.1:" + port, http.StatusOK},
		{"localhost:" + port, http.StatusOK},
		{"[::1]:" + port, http.StatusOK},
		{"weir.example.com", http.StatusOK},
	} {
		for _, path := range []string{"/admin/queues", "/admin/nodes", "/metrics"} {
			resp := get(open, path, c.host, "")
			if resp.StatusCode != c.want {
				t.Errorf("GET %s for Host %s: status %d, want %d", path, c.host, resp.StatusCode, c.want)
				continue
			}
			if c.want == http.StatusForbidden {
				if e := apiErrorOf(t, resp); e.Code != string(weir.CodeForbidden) || !strings.Contains(e.Message, "DNS rebinding") {
					t.Errorf("GET %s for Host %s: %+v; want forbidden naming DNS rebinding", path, c.host, e)
				}
			}
		}
	}
	if resp := get(withToken, "/admin/queues", "evil.example:"+tokenPort, "Bearer "+token); resp.StatusCode != http.StatusOK {
		t.Errorf("the admin token, Host evil.example: status %d, want 200", resp.StatusCode)
	}
	if resp := get(withToken, "/admin/queues", "evil.example:"+tokenPort, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token, token set, Host evil.example: status %d, want 401", resp.StatusCode)
	}
}

// TestMetricsAuth: /metrics is open by default and behind the admin
// guard with MetricsAuth.
func TestMetricsAuth(t *testing.T) {
	t.Parallel()
	const token = "adm_metrics"
	metrics := func(d *Deps) {
		d.MetricsHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "weir_up 1\n") })
	}
	open := setup(t, setupOpts{cfg: Config{AdminToken: token}, deps: metrics})
	if resp := open.getWith(t, "/metrics", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("default: status %d, want /metrics open", resp.StatusCode)
	}
	guarded := setup(t, setupOpts{cfg: Config{AdminToken: token, MetricsAuth: true}, deps: metrics})
	if resp := guarded.getWith(t, "/metrics", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("MetricsAuth without the token: status %d, want 401", resp.StatusCode)
	}
	if resp := guarded.getWith(t, "/metrics", "Bearer "+token); resp.StatusCode != http.StatusOK {
		t.Errorf("MetricsAuth with the token: status %d, want 200", resp.StatusCode)
	}
}

// TestAdminQueuesShadow: /admin/queues marks a scope whose limits are in
// shadow and says what they would have done: here, a request that ran
// beside a held slot of a concurrency of 1.
func TestAdminQueuesShadow(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: Config{AdminLoopback: true}, limits: weir.Limits{Concurrency: 1, Shadow: true}})
	scope := weir.PlatformModelScope("up/m")
	held, err := b.engine.TryAcquire(t.Context(), admission.Request{ID: "running", Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: scope, Amount: 1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.engine.Release(context.Background(), held.ID, held.Owner) })
	if resp := b.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("chat beside the held slot: status %d, want 200", resp.StatusCode)
	}

	resp := b.getWith(t, "/admin/queues", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/admin/queues: status %d", resp.StatusCode)
	}
	var view struct {
		Scopes []map[string]json.RawMessage `json:"scopes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&view); err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, s := range view.Scopes {
		switch name := string(s["name"]); name {
		case `"` + scope + `"`:
			found++
			if got := string(s["shadow"]); got != "true" {
				t.Errorf("%s: shadow = %s, want true", name, got)
			}
			if got, want := string(s["would"]), `{"waits":1,"refusals":0,"timeouts":0,"queued":0}`; got != want {
				t.Errorf("%s: would = %s, want %s", name, got, want)
			}
			if got := string(s["in_flight"]); got != "1" {
				t.Errorf("%s: in_flight = %s, want 1 (the held slot)", name, got)
			}
		default:
			if s["shadow"] != nil || s["would"] != nil {
				t.Errorf("%s, enforced, shows shadow %s, would %s", name, s["shadow"], s["would"])
			}
		}
	}
	if found != 1 {
		t.Errorf("/admin/queues lists %s %d times, want once", scope, found)
	}
}
