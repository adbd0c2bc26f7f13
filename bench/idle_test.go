package bench

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestIdleConfigErrors(t *testing.T) {
	t.Parallel()
	valid := func() IdleConfig {
		return IdleConfig{Weir: Weir{Exe: "/bin/weir", ServeArgs: []string{"serve"}, CreateKey: noKey}, Duration: time.Minute, Settle: time.Second}
	}
	if err := valid().validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tc := range []struct {
		change func(*IdleConfig)
		want   string
	}{
		{func(c *IdleConfig) { c.Weir.Exe = "" }, "Weir.Exe"},
		{func(c *IdleConfig) { c.Duration = time.Millisecond }, "--duration"},
		{func(c *IdleConfig) { c.Settle = -time.Second }, "--settle"},
		{func(c *IdleConfig) { c.Fleet = FleetConfig{Replicas: 1} }, "--dsn"},
		{func(c *IdleConfig) { c.Fleet = FleetConfig{Replicas: 2, DSN: "postgres://x"} }, "one replica"},
	} {
		c := valid()
		tc.change(&c)
		if err := c.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error naming %s, got %v", tc.want, err)
		}
	}
}

func TestIdleLineVerdict(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cpu    time.Duration
		window time.Duration
		want   string
	}{
		{120 * time.Millisecond, time.Minute, "20.0 ms per 10s  0.200% of a core (goal <= 0.2%: met)"},
		{130 * time.Millisecond, time.Minute, "21.7 ms per 10s  0.217% of a core (goal <= 0.2%: missed)"},
		{400 * time.Millisecond, 10 * time.Second, "400.0 ms per 10s  4.000% of a core (goal <= 0.2%: missed)"},
	} {
		if got := idleLine(tc.cpu, 600, tc.window); !strings.Contains(got, tc.want) {
			t.Errorf("idleLine(%s over %s) = %q, want it to hold %q", tc.cpu, tc.window, got, tc.want)
		}
	}
	if got := idleLine(0, 600, time.Minute); !strings.Contains(got, "context switches 10.0/s") {
		t.Errorf("idleLine's switches: %q, want 10.0/s", got)
	}
}

func TestSwitchesOfThisProcess(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc here")
	}
	before := switches(os.Getpid())
	for range 10 {
		time.Sleep(time.Millisecond) // a voluntary switch each
	}
	if after := switches(os.Getpid()); after <= before {
		t.Errorf("context switches %d after sleeping, %d before: want more", after, before)
	}
}
