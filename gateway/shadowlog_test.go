package gateway

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
)

// records keeps the log records a handler gets.
type records struct {
	mu  sync.Mutex
	got []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, rec)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

func (r *records) lines() []map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]string
	for _, rec := range r.got {
		m := map[string]string{"msg": rec.Message, "level": rec.Level.String()}
		rec.Attrs(func(a slog.Attr) bool {
			m[a.Key] = a.Value.String()
			return true
		})
		out = append(out, m)
	}
	return out
}

// TestShadowLogSums: the first shadow event is logged at once; the next
// ones within a minute are summed into one line per scope, written when
// the minute is up; other events are not logged.
func TestShadowLogSums(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	rec := &records{}
	l := NewShadowLog(ShadowLogConfig{Logger: slog.New(rec), Clock: clk})
	shadow := func(scope string, would admission.Outcome) admission.Event {
		return admission.Event{Outcome: admission.OutcomeShadow, Scope: scope, Would: would, WaiterID: "w", Lease: 1}
	}

	l.Observe(admission.Event{Outcome: admission.OutcomeAdmitted})
	l.Observe(shadow("pm:up/m", admission.OutcomeQueued))
	clk.Advance(0)
	lines := rec.lines()
	if len(lines) != 1 || lines[0]["scope"] != "pm:up/m" || lines[0]["would_queued"] != "1" || lines[0]["level"] != "INFO" {
		t.Fatalf("after the first event: %v; want one info line for pm:up/m", lines)
	}

	clk.Advance(10 * time.Second)
	for range 3 {
		l.Observe(shadow("pm:up/m", admission.OutcomeQueued))
	}
	l.Observe(shadow("pm:up/m", admission.OutcomeTimeout))
	l.Observe(shadow("group:team", admission.OutcomeRateLimited))
	clk.Advance(49 * time.Second)
	if n := len(rec.lines()); n != 1 {
		t.Fatalf("%d lines before the minute is up, want 1", n)
	}
	clk.Advance(time.Second)
	lines = rec.lines()
	if len(lines) != 3 {
		t.Fatalf("lines after the minute: %v; want 3", lines)
	}
	pm, group := lines[1], lines[2] // the busiest scope first
	if pm["scope"] != "pm:up/m" || pm["requests"] != "4" || pm["would_queued"] != "3" || pm["would_timeout"] != "1" || pm["over"] != "50s" {
		t.Errorf("platform model's line: %v", pm)
	}
	if group["scope"] != "group:team" || group["would_rate_limited"] != "1" || group["limits"] != "group team" {
		t.Errorf("group's line: %v", group)
	}
	clk.Advance(time.Hour)
	if n := len(rec.lines()); n != 3 {
		t.Errorf("%d lines after a quiet hour, want 3", n)
	}
}

// TestShadowLogBoundsScopes: a batch names at most MaxScopes scopes and
// sums the rest in one line.
func TestShadowLogBoundsScopes(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	rec := &records{}
	l := NewShadowLog(ShadowLogConfig{Logger: slog.New(rec), Clock: clk, MaxScopes: 2})
	for _, s := range []string{"key:a", "key:b", "key:b", "key:c", "key:d"} {
		l.Observe(admission.Event{Outcome: admission.OutcomeShadow, Scope: s, Would: admission.OutcomeQueued})
	}
	clk.Advance(0)
	lines := rec.lines()
	if len(lines) != 3 || lines[0]["scope"] != "key:b" || lines[2]["scopes"] != "2" || lines[2]["requests"] != "2" {
		t.Errorf("lines: %v; want key:b, key:a, then 2 more scopes summed", lines)
	}
}
