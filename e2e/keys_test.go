package e2e

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
)

// keyCacheTTL is how long the gateway trusts a key it looked up; a
// revocation must take effect within it.
const keyCacheTTL = 2 * time.Second

// TestKeys: `weir keys create` shows a secret once, `list` shows its
// prefix but never the secret, and a key revoked while the gateway serves
// is refused with the usual 401 within the key cache TTL, while other keys
// keep working.
func TestKeys(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{})
	g := startGateway(t, "", oneModel(up.URL, ""))
	id, secret := g.createKey(t, "--name", "alice")
	_, other := g.createKey(t, "--name", "bob")
	if id == "" || len(secret) < 20 {
		t.Fatalf("key id %q, secret %q: want an id and a long secret", id, secret)
	}

	list := runWeir(t, "keys", "list", "-c", g.Config)
	if strings.Contains(list, secret) {
		t.Fatalf("weir keys list shows the secret:\n%s", list)
	}
	row := keyRow(t, list, id)
	if len(row) < 4 || row[1] != "alice" || row[3] != "default" {
		t.Fatalf("weir keys list row %q: want name alice, group default", row)
	}
	prefix, ok := strings.CutSuffix(row[2], "…")
	if !ok || prefix == "" || !strings.HasPrefix(secret, prefix) || len(prefix) > len(secret)/2 {
		t.Fatalf("weir keys list shows prefix %q for secret %q: want a short prefix of it followed by …", row[2], secret)
	}
	if !strings.HasSuffix(strings.TrimSpace(strings.Join(row, " ")), "active") {
		t.Errorf("a new key is not listed as active: %q", row)
	}

	chat := func(key string) *reply {
		return g.do(t, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat")})
	}
	if rep := chat(secret); rep.Status != http.StatusOK { // now cached by the gateway
		t.Fatalf("a new key: status %d: %s", rep.Status, rep.Body)
	}

	runWeir(t, "keys", "revoke", "-c", g.Config, id)
	revokedAt := time.Now()
	var refused *reply
	took := waitFor(t, keyCacheTTL+2*time.Second, "the revoked key to be refused", func() bool {
		rep := chat(secret)
		if rep.Status == http.StatusOK {
			return false
		}
		refused = rep
		return true
	})
	t.Logf("the revoked key was refused %s after the revocation", took)
	checkError(t, refused, http.StatusUnauthorized, "unauthorized")
	if took := time.Since(revokedAt); took > keyCacheTTL+500*time.Millisecond {
		t.Errorf("the revoked key was refused only %s after the revocation, want within the %s key cache TTL", took, keyCacheTTL)
	}
	unknown := g.do(t, request{Path: "/v1/chat/completions", Key: secret + "x", Body: chatBody("chat")})
	if !bytes.Equal(refused.Body, unknown.Body) || refused.Status != unknown.Status {
		t.Errorf("a revoked key got %d %s, an unknown one %d %s: want the same answer", refused.Status, refused.Body, unknown.Status, unknown.Body)
	}
	if rep := chat(other); rep.Status != http.StatusOK {
		t.Errorf("another key after the revocation: status %d: %s", rep.Status, rep.Body)
	}

	list = runWeir(t, "keys", "list", "-c", g.Config)
	if row := keyRow(t, list, id); !strings.Contains(strings.Join(row, " "), "revoked") {
		t.Errorf("weir keys list does not show the key as revoked: %q", row)
	}
}

// keyRow returns the fields of the row of key id in `weir keys list`.
func keyRow(t *testing.T, list, id string) []string {
	t.Helper()
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == id {
			return f
		}
	}
	t.Fatalf("weir keys list has no key %s:\n%s", id, list)
	return nil
}
