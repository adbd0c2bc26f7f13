package e2e

// A fleet whose replicas freeze or die while their calls run: limits
// hold through a replica paused with calls upstream (its capacity stays
// held until the calls are surely over), and a leader that dies is
// replaced at once.

import (
	"fmt"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
)

// frozenCatalog serves model "chat" through "up/chat" of concurrency 5,
// on a platform whose calls time out after callTimeout.
func frozenCatalog(upURL string, callTimeout time.Duration) string {
	return fmt.Sprintf(`platforms:
  - name: up
    base_url: %s
    call_timeout: %s
platform_models:
  - name: up/chat
    platform: up
    upstream: gpt-4o-mini
    concurrency: 5
models:
  - name: chat
    kind: chat
    candidates:
      - platform_model: up/chat
`, upURL, callTimeout)
}

// TestFleetFrozenReplicaHoldsItsCalls: a replica holding five 12 s
// calls of a platform model of concurrency 5 is paused (SIGSTOP) while
// the other keeps sending: its capacity stays held until its calls are
// surely over (their call timeout, 15 s), so the mock never runs more
// than 5 at once; the other's requests are served once that bound has
// passed; the paused replica, resumed, finds itself fenced and stops.
// Whether the paused replica leads or not.
func TestFleetFrozenReplicaHoldsItsCalls(t *testing.T) {
	t.Parallel()
	for _, frozenLeads := range []bool{false, true} {
		name := "follower"
		if frozenLeads {
			name = "leader"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const (
				slow        = 12 * time.Second
				callTimeout = 15 * time.Second
			)
			up := startUpstream(t, mock.Config{Latency: 100 * time.Millisecond})
			up.slow.Store(int64(slow))
			f := startFleet(t, 2, frozenCatalog(up.URL, callTimeout))
			ids := f.ids()
			f.ready(t, ids...)
			lead := f.leader(t, 20*time.Second)
			frozenID, otherID := ids[0], ids[1]
			if (frozenID == lead) != frozenLeads {
				frozenID, otherID = otherID, frozenID
			}
			frozen, other := f.rs[frozenID], f.rs[otherID]
			_, key := other.createKey(t, "--name", "frozen")

			ctx := t.Context()
			for i := range 5 {
				_ = frozen.sendAsync(ctx, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat"), Agent: fmt.Sprintf("slow-%d", i)})
			}
			waitFor(t, 10*time.Second, "the paused replica's five calls upstream", func() bool { return up.Mock.Stats().InFlight == 5 })
			if err := frozen.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			stopped := time.Now()
			t.Cleanup(func() { _ = frozen.cmd.Process.Signal(syscall.SIGCONT) })

			load := newFleetLoad()
			for i := range 10 {
				load.send(other, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat"), Agent: fmt.Sprintf("other-%d", i)})
			}
			load.wait()
			statuses, errs := load.result()
			if statuses[http.StatusOK] != 10 {
				t.Errorf("answers through the replica that kept running: %v; want 10 × 200 (first errors: %v)", statuses, errs[:min(len(errs), 5)])
			}
			served := time.Since(stopped)
			st := up.Mock.Stats()
			t.Logf("the other replica's requests were all served %v after the pause; the mock's peak %d", served.Round(time.Millisecond), st.PeakInFlight)
			if st.PeakInFlight > 5 {
				t.Errorf("the mock's peak concurrency %d; want at most the limit, 5 (the paused replica's calls ran on)", st.PeakInFlight)
			}
			if served < slow {
				t.Errorf("the other replica was served %v after the pause, before the paused replica's calls ended (%v)", served, slow)
			}

			if err := frozen.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			select {
			case <-frozen.exited:
				if frozen.err == nil {
					t.Errorf("the fenced replica exited cleanly; want a failure exit")
				}
			case <-time.After(20 * time.Second):
				t.Errorf("the paused replica, fenced, still runs 20s after SIGCONT")
			}
			delete(f.rs, frozenID)
			if st := up.Mock.Stats(); st.PeakInFlight > 5 {
				t.Errorf("the mock's peak concurrency %d after the paused replica resumed; want at most 5", st.PeakInFlight)
			}
			f.idle(t, chatScope, otherID)
		})
	}
}

// TestFleetLeaderKilledResumesAtOnce: kill -9 of the leader, under load
// through the other replicas, with a term TTL of 10 s: the others see
// its process die (its sessions and its PostgreSQL connection close
// together), one takes the term at once, and admissions resume within
// 2 s, the mock never over the limit.
func TestFleetLeaderKilledResumesAtOnce(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{Latency: 50 * time.Millisecond})
	f := startFleetWith(t, 3, chatFleetCatalog(up.URL, 3), fleetTimings{termTTL: 10 * time.Second, heartbeat: fleetHeartbeat})
	ids := f.ids()
	f.ready(t, ids...)
	lead := f.leader(t, 20*time.Second)
	others := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == lead })
	_, key := f.rs[others[0]].createKey(t, "--name", "kill")

	load := newFleetLoad()
	stop := load.flood(f, others, key, 3)
	waitFor(t, 10*time.Second, "load flowing", func() bool { return up.Mock.Stats().Requests >= 20 })

	old := f.rs[lead]
	if err := old.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-old.exited
	delete(f.rs, lead)
	waitFor(t, 30*time.Second, "admissions after the leader died", func() bool {
		return slices.ContainsFunc(up.ArrivalTimes(), func(at time.Time) bool { return at.After(killed) })
	})
	served := up.Mock.Stats().Requests
	waitFor(t, 20*time.Second, "requests served under the new leader", func() bool { return up.Mock.Stats().Requests >= served+20 })
	stop()

	// The gap: from the last admission before the kill to the first
	// after it.
	var before, after time.Time
	for _, at := range up.ArrivalTimes() {
		if !at.After(killed) {
			before = at
		} else if after.IsZero() {
			after = at
		}
	}
	gap := after.Sub(before)
	t.Logf("no admission for %v around the leader's death (%v after kill -9 to the first admission); new leader %s",
		gap.Round(time.Millisecond), after.Sub(killed).Round(time.Millisecond), f.leader(t, 10*time.Second, others...))
	if gap > 2*time.Second {
		t.Errorf("admissions stopped for %v when the leader died; want at most 2s", gap.Round(time.Millisecond))
	}
	if st := up.Mock.Stats(); st.PeakInFlight > 3 {
		t.Errorf("the mock's peak concurrency %d; want at most the limit, 3", st.PeakInFlight)
	}
	statuses, errs := load.result()
	if statuses[http.StatusOK] == 0 || statuses[http.StatusOK]+statuses[http.StatusServiceUnavailable] != sum(statuses) {
		t.Errorf("answers through the replicas that kept running: %v; want 200s (503 at worst) (first errors: %v)", statuses, errs[:min(len(errs), 5)])
	}
	f.idle(t, chatScope, others...)
}
