package edge

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// openAs opens a Control stream with token for the node process
// instance.
func (b *testBundle) openAs(t *testing.T, token, instance string) *testSession {
	t.Helper()
	s := b.open(t, token)
	s.instance = instance
	return s
}

// TestTokenInUseRefused: a second process registering with the token of
// a node whose session is live is refused with token_in_use, told why
// and when to try again, and counted; the live session goes on as it
// was, with what it holds.
func TestTokenInUseRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.openAs(t, "wn-a", "proc-1")
	w := first.welcome(testProvider("p", 2, "m"))
	scope := weir.NodeScope("node_a", "p")
	b.hold(t, "run", scope, admission.Owner{ID: weir.NodeOwner("node_a"), Gen: w.Generation})

	second := b.openAs(t, "wn-a", "proc-2")
	m, err := second.register(testProvider("p", 2, "m"))
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	r := m.GetRefusal()
	if r == nil || r.Code != "token_in_use" {
		t.Fatalf("a second process's Register answered %v; want a token_in_use refusal", m)
	}
	for _, want := range []string{"gpu-a", "node_a", "proc-1", "own token"} {
		if !strings.Contains(r.Message, want) {
			t.Errorf("the refusal %q does not name %q", r.Message, want)
		}
	}
	if max := b.hub.cfg.HeartbeatTimeout + b.hub.cfg.HeartbeatInterval; r.RetryAfterMs <= 0 || r.RetryAfterMs > max.Milliseconds() {
		t.Errorf("retry after %dms; want within the heartbeat timeout and an interval (%s)", r.RetryAfterMs, max)
	}
	if code := second.ended(); code != codes.AlreadyExists {
		t.Errorf("the refused stream ended %s; want AlreadyExists", code)
	}
	if n := b.conflicts.Load(); n != 1 {
		t.Errorf("%d conflicts counted; want 1", n)
	}

	// The first session is as it was.
	first.heartbeat()
	first.sync()
	st := b.scope(t, scope)
	if st.Orphaned || st.Used != 1 || st.Config.OwnerGen != w.Generation {
		t.Errorf("the live session's scope after the refusal: %+v used %d orphaned %v; want generation %d holding its run",
			st.Config, st.Used, st.Orphaned, w.Generation)
	}
	if got := b.hub.Serving("m"); len(got) != 1 || got[0].Gen != w.Generation {
		t.Errorf("serving %+v; want the first session alone", got)
	}
}

// TestSameInstanceReconnectSupersedes: the same process registering
// again (its connection broke, the old session half-open) supersedes its
// live session, as any reconnect does.
func TestSameInstanceReconnectSupersedes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := b.openAs(t, "wn-a", "proc-1")
	w1 := old.welcome(testProvider("p", 1, "m"))
	s := b.openAs(t, "wn-a", "proc-1")
	if w2 := s.welcome(testProvider("p", 1, "m")); w2.Generation <= w1.Generation {
		t.Fatalf("reconnect got generation %d after %d", w2.Generation, w1.Generation)
	}
	if code := old.ended(); code != codes.Aborted {
		t.Errorf("the superseded stream ended %s; want Aborted", code)
	}
	if n := b.conflicts.Load(); n != 0 {
		t.Errorf("%d conflicts counted; want none", n)
	}
}

// TestTokenInUseTakenOverOnceSilent: a process refused while the node's
// session was live registers once that session has missed its
// heartbeats (its process died with its connection half-open), within
// the wait the refusal gave.
func TestTokenInUseTakenOverOnceSilent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := b.openAs(t, "wn-a", "proc-1")
	w1 := old.welcome(testProvider("p", 1, "m"))

	refused := b.openAs(t, "wn-a", "proc-2")
	m, err := refused.register(testProvider("p", 1, "m"))
	if err != nil || m.GetRefusal().GetCode() != "token_in_use" {
		t.Fatalf("register while the old session is live: %v, %v; want token_in_use", m, err)
	}
	b.clock.Advance(time.Duration(m.GetRefusal().RetryAfterMs) * time.Millisecond)
	if code := old.ended(); code != codes.Unavailable {
		t.Fatalf("the silent session ended %s; want Unavailable (heartbeats missed)", code)
	}
	s := b.openAs(t, "wn-a", "proc-2")
	if w2 := s.welcome(testProvider("p", 1, "m")); w2.Generation <= w1.Generation {
		t.Fatalf("the new process got generation %d after %d", w2.Generation, w1.Generation)
	}
}
