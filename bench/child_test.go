package bench

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestWarnsOrWorseKeepsEveryWarning checks the child's log filter against
// slog's own JSON lines: every WARN and ERROR line is kept, whatever its
// attributes hold, and INFO and DEBUG lines, an access log's, are not.
func TestWarnsOrWorseKeepsEveryWarning(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for _, tc := range []struct {
		level slog.Level
		want  bool
	}{
		{slog.LevelDebug, false},
		{slog.LevelInfo, false},
		{slog.LevelWarn, true},
		{slog.LevelWarn + 2, true}, // WARN+2
		{slog.LevelError, true},
		{slog.LevelError + 4, true}, // ERROR+4
	} {
		buf.Reset()
		log.Log(t.Context(), tc.level, "request", "path", `"level":"WARN"`, "status", 200)
		if got := warnsOrWorse(bytes.TrimSpace(buf.Bytes())); got != tc.want {
			t.Errorf("warnsOrWorse(%s) = %v, want %v", buf.Bytes(), got, tc.want)
		}
	}
}

// TestChildReadsItsLog starts a child that logs before and after its
// serving line and exits: startChild learns its address, the warnings
// hold every WARN and ERROR line, one longer than a read included, and
// seen gets every line in order.
func TestChildReadsItsLog(t *testing.T) {
	t.Parallel()
	long := `{"level":"WARN","msg":"long","pad":"` + strings.Repeat("x", 100<<10) + `"}`
	script := `printf '%s\n' '{"level":"INFO","msg":"starting"}' '{"level":"WARN","msg":"early"}' >&2
printf '%s\n' '{"level":"INFO","msg":"weir serving","addr":"127.0.0.1:1"}' >&2
printf '%s\n' '{"level":"INFO","msg":"request"}' '{"level":"ERROR","msg":"late"}' "$1" >&2`
	var msgs []string
	c, err := startChild("/bin/sh", []string{"-c", script, "sh", long}, time.Minute, func(v logLine) { msgs = append(msgs, v.Msg) })
	if err != nil {
		t.Fatal(err)
	}
	if c.url != "http://127.0.0.1:1" {
		t.Errorf("url = %q", c.url)
	}
	<-c.exited
	w := c.warnings()
	for _, want := range []string{`1x "early"`, `1x "late"`, `1x "long"`} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %s: %.200s", want, w)
		}
	}
	if want := []string{"starting", "early", "weir serving", "request", "late", "long"}; !slices.Equal(msgs, want) {
		t.Errorf("seen %q, want %q", msgs, want)
	}
}
