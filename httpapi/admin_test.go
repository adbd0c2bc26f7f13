package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
