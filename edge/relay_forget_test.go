package edge

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// holdingDir is a Directory whose replicas at addrs hold every node.
type holdingDir struct {
	staticDir
	addrs []string
}

func (d holdingDir) Holding(string) []string { return d.addrs }

var _ Holders = holdingDir{}

// forgetFleet is two replicas: here, whose Hub held node_a's session
// and serves forgets for the others, and there, whose Hub has node_b.
func forgetFleet(t *testing.T) (here, there *testBundle, relay *Relay) {
	t.Helper()
	here, there = forgetBundle(t, time.Hour), forgetBundle(t, time.Hour)
	srv := httptest.NewServer(NewRelay(RelayConfig{Secret: testSecret}, RelayDeps{Hub: here.hub}).ForgetHandler())
	t.Cleanup(srv.Close)
	relay = NewRelay(RelayConfig{Secret: testSecret}, RelayDeps{Hub: there.hub, Directory: holdingDir{addrs: []string{srv.URL}}})
	return here, there, relay
}

// TestRelayForgetsAcrossReplicas: a forget asked of any replica
// forgets the node on the replica whose Hub held its session, which
// retires the scopes that session configured.
func TestRelayForgetsAcrossReplicas(t *testing.T) {
	t.Parallel()
	here, _, relay := forgetFleet(t)
	_, scopes := here.goneNode(t)
	f, err := relay.Forget(t.Context(), "gpu-a")
	if err != nil || f.ID != "node_a" || !slices.Equal(f.Scopes, scopes) {
		t.Fatalf("forget another replica's node: %+v, %v; want node_a's scopes %v", f, err, scopes)
	}
	for _, sc := range scopes {
		if here.hasScope(t, sc) {
			t.Errorf("%s is still configured on the replica that held the node", sc)
		}
	}
	if n := here.hub.Nodes(t.Context()); len(n) != 0 {
		t.Errorf("the holding replica still lists %+v", n)
	}
	if _, err := relay.Forget(t.Context(), "gpu-a"); !errors.Is(err, ErrUnknownNode) || !errors.Is(err, weir.ErrNotFound) {
		t.Errorf("forget it again: %v, want ErrUnknownNode", err)
	}
}

// TestRelayForgetRefusesLiveNode: a node live on another replica is
// refused, and nothing is forgotten on this one either.
func TestRelayForgetRefusesLiveNode(t *testing.T) {
	t.Parallel()
	here, there, relay := forgetFleet(t)
	live := here.open(t, "wn-a")
	live.welcome(testProvider("p", 1, "m"))
	// This replica still has the node's older, gone session.
	old := there.open(t, "wn-a")
	old.welcome(testProvider("p", 1, "m"))
	old.cancel()
	there.waitOrphaned(t, weir.NodeScope("node_a", "p"))
	_, err := relay.Forget(t.Context(), "node_a")
	if !errors.Is(err, ErrNodeConnected) || !errors.Is(err, weir.ErrConflict) || !strings.Contains(err.Error(), "live session") {
		t.Fatalf("forget a node live elsewhere: %v, want ErrNodeConnected", err)
	}
	if n := there.hub.Nodes(t.Context()); len(n) != 1 {
		t.Errorf("this replica forgot the node all the same: %+v", n)
	}
}

// TestForgetHandlerNeedsSecret: the forget path refuses a request
// without the fleet's secret, or with a bad body, and changes nothing.
func TestForgetHandlerNeedsSecret(t *testing.T) {
	t.Parallel()
	b := forgetBundle(t, time.Hour)
	_, scopes := b.goneNode(t)
	h := NewRelay(RelayConfig{Secret: testSecret}, RelayDeps{Hub: b.hub}).ForgetHandler()
	for _, tc := range []struct {
		auth, body string
		status     int
	}{
		{"", `{"node":"gpu-a"}`, http.StatusUnauthorized},
		{"Bearer wrong", `{"node":"gpu-a"}`, http.StatusUnauthorized},
		{"Bearer " + testSecret, `{"node":`, http.StatusBadRequest},
		{"Bearer " + testSecret, `{}`, http.StatusBadRequest},
	} {
		req := httptest.NewRequest(http.MethodPost, ForgetPath, strings.NewReader(tc.body))
		req.Header.Set("Authorization", tc.auth)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != tc.status {
			t.Errorf("auth %q body %s: %d %s, want %d", tc.auth, tc.body, w.Code, w.Body, tc.status)
		}
	}
	if !b.hasScope(t, scopes[0]) {
		t.Fatal("a refused forget retired the node's scope")
	}
}

// TestRelayForgetRefusesLocalLiveNode: a node live on the replica asked
// is refused before any other replica is asked.
func TestRelayForgetRefusesLocalLiveNode(t *testing.T) {
	t.Parallel()
	here, there, relay := forgetFleet(t)
	_, scopes := here.goneNode(t) // an older session, gone, on the other replica
	live := there.open(t, "wn-a")
	live.welcome(testProvider("p", 1, "m"))
	if _, err := relay.Forget(t.Context(), "gpu-a"); !errors.Is(err, ErrNodeConnected) {
		t.Fatalf("forget a node live here: %v, want ErrNodeConnected", err)
	}
	if !here.hasScope(t, scopes[0]) || len(here.hub.Nodes(t.Context())) != 1 {
		t.Error("the other replica forgot its gone session of the node all the same")
	}
}
