package httpapi

import (
	"net/http"
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
