package bench

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir/loadgen"
)

// Out of process, the CPU profile and the trace of proxy or weir are
// taken in the child: its flags, and the signals over the measured phase.
func TestChildProfileSignalsOverTheMeasuredPhase(t *testing.T) {
	t.Parallel()
	c := OverheadConfig{OutOfProcess: true, ProfileTarget: "weir", CPUProfile: "cpu.pb", Trace: "trace.out"}
	if got, want := c.profileArgs(), []string{"--cpuprofile", "cpu.pb", "--trace", "trace.out"}; !slices.Equal(got, want) {
		t.Errorf("profileArgs = %q, want %q", got, want)
	}
	script := `trap 'echo "{\"level\":\"WARN\",\"msg\":\"usr1\"}" >&2' USR1
trap 'echo "{\"level\":\"WARN\",\"msg\":\"usr2\"}" >&2; exit 0' USR2
printf '%s\n' '{"level":"INFO","msg":"serving","addr":"127.0.0.1:1"}' >&2
while :; do sleep 0.01; done`
	msgs := make(chan string, 8)
	ch, err := startChild("/bin/sh", []string{"-c", script}, time.Minute, func(v logLine) { msgs <- v.Msg })
	if err != nil {
		t.Fatal(err)
	}
	defer ch.kill()
	if m := <-msgs; m != "serving" {
		t.Fatalf("first line %q, want serving", m)
	}
	// Another target is not signalled.
	var other loadgen.Config
	c.childProfile(overheadTarget{name: "proxy", procs: []*child{ch}}, &other)()
	if other.OnMeasure != nil {
		t.Error("proxy, not the profiled target, got an OnMeasure")
	}
	var cfg loadgen.Config
	stop := c.childProfile(overheadTarget{name: "weir", procs: []*child{ch}}, &cfg)
	cfg.OnMeasure()
	if m := <-msgs; m != "usr1" {
		t.Fatalf("after the measured phase starts the child logged %q, want usr1 (SIGUSR1)", m)
	}
	stop()
	if m := <-msgs; m != "usr2" {
		t.Fatalf("after it ends the child logged %q, want usr2 (SIGUSR2)", m)
	}
	<-ch.exited
	if w := ch.warnings(); !strings.Contains(w, `1x "usr1"`) || !strings.Contains(w, `1x "usr2"`) {
		t.Errorf("warnings %q, want one usr1 and one usr2", w)
	}
}

// Out of process, --cpuprofile and --trace may name proxy or weir; only
// --memprofile stays with this process.
func TestOutOfProcessProfilesAChild(t *testing.T) {
	t.Parallel()
	for _, target := range []string{"proxy", "weir"} {
		c := OverheadConfig{OutOfProcess: true, ProfileTarget: target, CPUProfile: "cpu.pb", Trace: "trace.out",
			Weir: Weir{FloorExe: "weir-bench", ProxyArgs: []string{"overhead-proxy"}}}
		if err := c.validateOutOfProcess(); err != nil && strings.Contains(err.Error(), "profile") {
			t.Errorf("%s: %v", target, err)
		}
	}
}
