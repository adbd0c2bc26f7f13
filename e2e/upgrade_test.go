package e2e

// A rolling upgrade: the previous release's build and this one's share
// one PostgreSQL and one leader while a fleet is upgraded replica by
// replica (docs/upgrades.md).

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
)

// previousRelease is the commit whose build the rolling-upgrade test
// runs beside this one: the last whose fleet protocol named no version
// (version 1).
const previousRelease = "2d24a00"

// buildAt returns a weir binary built from the repository at commit,
// kept by commit under the user's cache directory so that a rerun takes
// it from there. It skips the test where the checkout's git history
// does not hold commit (a shallow clone): the test needs the full
// history, as CI's clone has.
func buildAt(t *testing.T, commit string) string {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skipf("no git to build weir at %s with: %v", commit, err)
	}
	out, err := exec.Command(git, "-C", "..", "rev-parse", "--verify", "--quiet", commit+"^{commit}").Output()
	if err != nil {
		t.Skipf("this checkout's git history lacks %s, the previous release the upgrade test runs: fetch the full history (git fetch --unshallow) to run it", commit)
	}
	hash := strings.TrimSpace(string(out))
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "weir-e2e", hash)
	bin := filepath.Join(dir, "weir")
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin
	}
	// Each build in a directory of its own, renamed into place: two test
	// processes building at once do not meet.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.MkdirTemp(dir, "src-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(src)
	archive := exec.Command(git, "-C", "..", "archive", "--format=tar", hash)
	untar := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	untar.Stdin = pipe
	if err := archive.Start(); err != nil {
		t.Fatal(err)
	}
	if out, err := untar.CombinedOutput(); err != nil {
		t.Fatalf("extract %s: %v\n%s", commit, err, out)
	}
	if err := archive.Wait(); err != nil {
		t.Fatalf("git archive %s: %v", commit, err)
	}
	tmp := filepath.Join(src, "weir")
	build := exec.Command("go", "build", "-buildvcs=false", "-o", tmp, "./cmd/weir")
	build.Dir = src
	build.Env = append(os.Environ(), "GOWORK=off")
	start := time.Now()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/weir at %s: %v\n%s", commit, err, out)
	}
	t.Logf("built weir at %s in %v, kept as %s", commit, time.Since(start).Round(time.Millisecond), bin)
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// chatTaskBody is a durable task of model "chat".
func chatTaskBody(tag string) string {
	return `{"model":"chat","input":{"messages":[{"role":"user","content":"` + tag + `"}]}}`
}

// upgradeLoad is the sync load of a rolling upgrade's phase: senders
// through each replica given, and the answers through each.
type upgradeLoad struct {
	by    map[string]*fleetLoad
	stops map[string]func()
}

func (u *upgradeLoad) through(f *fleetRig, key string, ids ...string) {
	for _, id := range ids {
		l := newFleetLoad()
		u.by[id] = l
		u.stops[id] = l.flood(f, []string{id}, key, 2)
	}
}

// ok counts the 200s l has had.
func (l *fleetLoad) ok() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.statuses[http.StatusOK]
}

// stop ends the senders through id and checks its answers: some 200s,
// and nothing but 503 besides (store_unavailable while a leader
// changes).
func (u *upgradeLoad) stop(t *testing.T, id, phase string) {
	t.Helper()
	u.stops[id]()
	delete(u.stops, id)
	statuses, errs := u.by[id].result()
	if statuses[http.StatusOK] == 0 || statuses[http.StatusOK]+statuses[http.StatusServiceUnavailable] != sum(statuses) {
		t.Errorf("%s: answers through %s %v; want 200s (503 at worst) (first errors: %v)", phase, id, statuses, errs[:min(len(errs), 5)])
	}
}

// TestFleetRollingUpgrade: the previous release's build (old) and this
// one's (new) on one PostgreSQL schema, upgraded one replica at a time
// under load: two old replicas (old leader); a new one joins (old leader,
// new follower); the old leader is killed and the new replica takes the
// term (new leader, old follower); the last old one is replaced (all
// new). Through every phase sync requests and durable tasks go through
// every replica: the mock never serves more than the limit at once (and
// is kept full), and every task submitted ends succeeded.
func TestFleetRollingUpgrade(t *testing.T) {
	t.Parallel()
	old := buildAt(t, previousRelease)
	const limit = 3
	up := startUpstream(t, mock.Config{Latency: 50 * time.Millisecond})
	// A heartbeat timeout longer than the pause that steers the election
	// below, so that the paused replica is not fenced.
	f := startFleetWith(t, 0, chatFleetCatalog(up.URL, limit), fleetTimings{termTTL: time.Second, heartbeat: 5 * time.Second})
	f.startBin(t, "o1", old)
	f.ready(t, "o1")
	f.startBin(t, "o2", old)
	f.ready(t, "o2")
	if lead := f.leader(t, 20*time.Second); lead != "o1" {
		t.Fatalf("%s leads; want o1, the first started", lead)
	}
	_, key := f.rs["o1"].createKey(t, "--name", "upgrade")

	load := &upgradeLoad{by: map[string]*fleetLoad{}, stops: map[string]func(){}}
	var tasks []string
	submit := func(phase string, ids ...string) {
		for _, id := range ids {
			for i := range 3 {
				o, _ := f.rs[id].submitTask(t, key, chatTaskBody(fmt.Sprintf("%s via %s, %d", phase, id, i)), "")
				tasks = append(tasks, o.ID)
			}
		}
	}
	// served waits until the mock has served n more requests.
	served := func(phase string, n int64) {
		t.Helper()
		from := up.Mock.Stats().Requests
		waitFor(t, 30*time.Second, phase+": requests served", func() bool { return up.Mock.Stats().Requests >= from+n })
	}

	// Old leader, new follower.
	load.through(f, key, "o1", "o2")
	submit("all old", "o1", "o2")
	served("all old", 20)
	f.startBin(t, "n1", "")
	f.ready(t, "n1")
	load.through(f, key, "n1")
	submit("old leader", "o1", "o2", "n1")
	served("old leader, new follower", 40)
	if lead := f.leader(t, 10*time.Second); lead != "o1" {
		t.Fatalf("%s leads after n1 joined; want o1 still", lead)
	}
	if v, _ := gaugeOf(t, f.rs["n1"], "weir_fleet_protocol"); v != 1 {
		t.Errorf("n1's session with the old leader runs at protocol %v; want 1", v)
	}
	if out := runWeir(t, "queues", "--addr", f.rs["n1"].URL); !strings.Contains(out, "\nfleet protocol: 1 (") {
		t.Errorf("weir queues on n1 does not show its session's protocol, 1:\n%s", out)
	}

	// New leader, old follower: o1 is killed while o2 is paused, so that
	// n1 takes the term; o2 then follows it.
	load.stop(t, "o1", "old leader, new follower")
	o1, o2 := f.rs["o1"], f.rs["o2"]
	if err := o2.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	o1.kill9(t)
	delete(f.rs, "o1")
	waitFor(t, 10*time.Second, "n1 to lead", func() bool { return leading(f.rs["n1"]) })
	if err := o2.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	f.ready(t, "o2")
	epoch, _ := gaugeOf(t, f.rs["n1"], "weir_fleet_epoch")
	waitFor(t, 10*time.Second, "o2 in n1's term", func() bool {
		v, _ := gaugeOf(t, o2, "weir_fleet_epoch")
		return v == epoch
	})
	okBefore := load.by["o2"].ok()
	submit("new leader", "o2", "n1")
	served("new leader, old follower", 40)
	if lead := f.leader(t, 10*time.Second); lead != "n1" {
		t.Fatalf("%s leads; want n1", lead)
	}
	waitFor(t, 10*time.Second, "o2 serving under the new leader", func() bool { return load.by["o2"].ok() >= okBefore+5 })

	// All new: o2 is replaced.
	load.stop(t, "o2", "new leader, old follower")
	o2.kill9(t)
	delete(f.rs, "o2")
	f.startBin(t, "n2", "")
	f.ready(t, "n2")
	load.through(f, key, "n2")
	submit("all new", "n1", "n2")
	served("all new", 40)
	load.stop(t, "n1", "all new")
	load.stop(t, "n2", "all new")

	done := f.rs["n1"].waitTerminal(t, key, tasks, 60*time.Second)
	for _, id := range tasks {
		if done[id].Status != "succeeded" {
			t.Errorf("task %s ended %s (%+v); want succeeded", id, done[id].Status, done[id].Error)
		}
	}
	if st := up.Mock.Stats(); st.PeakInFlight != limit {
		t.Errorf("the mock's peak concurrency %d; want exactly the limit, %d", st.PeakInFlight, limit)
	}
	for _, id := range []string{"n1", "n2"} {
		if v, _ := gaugeOf(t, f.rs[id], "weir_fleet_protocol_refusals_total"); v != 0 {
			t.Errorf("%s counted %v sessions refused for the protocol; want none", id, v)
		}
	}
	f.idle(t, chatScope, "n1", "n2")
}
