package jsonlog

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// floats are values whose encoding/json form is worth checking: zeros,
// exponents on both sides of its 1e-6 and 1e21 cut-offs, the extremes,
// and milliseconds as the access log writes them.
var floats = []float64{0, math.Copysign(0, -1), 1, -1, 0.001, 0.5, 1.5, 123.456, 2.675, 1e-6, 9.99e-7, 1e-7, 1.5e-9,
	1e-10, 1e20, 1e21, 1.2345e21, 1e100, -1e-7, -1e21, math.MaxFloat64, math.SmallestNonzeroFloat64, 5e-324,
	0.1 + 0.2, 1.0 / 3, 100000000000000000000, 4.94e-322, float64(math.MaxInt64), 12345.678, 0.000123}

// strs are strings with every kind of byte slog escapes or keeps.
var strs = []string{"", "plain", `quote " and \ backslash`, "<html> & 'amp'", "tab\tnew\nline\rret",
	"\b\f\x00\x01\x1f\x7f", "line\u2028sep\u2029para", "héllo wörld 日本", "bad \xff utf8 \xc3", "\xe2\x80", "/v1/chat/completions"}

// randomAttr is an attribute of a kind Handler writes itself, its key and
// value drawn from r.
func randomAttr(r *rand.Rand) slog.Attr {
	key := strs[1+r.IntN(len(strs)-1)]
	switch r.IntN(8) {
	case 0:
		return slog.String(key, strs[r.IntN(len(strs))])
	case 1:
		return slog.Int64(key, r.Int64()-r.Int64())
	case 2:
		return slog.Uint64(key, r.Uint64())
	case 3:
		return slog.Float64(key, floats[r.IntN(len(floats))])
	case 4:
		return slog.Float64(key, math.Float64frombits(r.Uint64())) // any bits, NaN and infinities too
	case 5:
		return slog.Float64(key, float64(r.IntN(10_000_000))/1000) // a duration in ms, to the µs
	case 6:
		return slog.Bool(key, r.IntN(2) == 0)
	default:
		return slog.Duration(key, time.Duration(r.Int64()))
	}
}

// otherAttrs are attributes Handler hands to slog.JSONHandler.
var otherAttrs = []slog.Attr{
	slog.Group("g", slog.String("a", "b"), slog.Int("n", 1)),
	slog.Group("", slog.String("inlined", "x")),
	slog.Any("err", errors.New("boom")),
	slog.Any("slice", []int{1, 2}),
	slog.Any("", nil),
	slog.String("", "empty key"),
	slog.Float64("nan", math.NaN()),
	slog.Time("far", time.Date(10001, 1, 1, 0, 0, 0, 0, time.UTC)),
}

// times are records' times: with a monotonic reading, in zones, zero.
var times = []time.Time{time.Now(), time.Date(2026, 12, 7, 3, 4, 5, 123456789, time.UTC),
	time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", -7*3600-30*60)), {}, time.Unix(0, 1)}

var levels = []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError, slog.LevelInfo + 2, -8}

// TestHandlerWritesSlogsBytes compares Handler's lines, through Handle
// and HandleAttrs, with slog.JSONHandler's for the same records.
func TestHandlerWritesSlogsBytes(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		attrs := make([]slog.Attr, r.IntN(26))
		for j := range attrs {
			attrs[j] = randomAttr(r)
			if r.IntN(40) == 0 {
				attrs[j] = otherAttrs[r.IntN(len(otherAttrs))]
			}
		}
		if r.IntN(10) == 0 {
			attrs = append(attrs, slog.Time("at", times[r.IntN(len(times))]))
		}
		at, level, msg := times[r.IntN(len(times))], levels[r.IntN(len(levels))], strs[r.IntN(len(strs))]
		if r.IntN(50) == 0 {
			at = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		var want, gotRecord, gotAttrs bytes.Buffer
		rec := slog.NewRecord(at, level, msg, 0)
		rec.AddAttrs(attrs...)
		ctx := context.Background()
		if err := slog.NewJSONHandler(&want, &slog.HandlerOptions{Level: slog.Level(-8)}).Handle(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if err := New(&gotRecord, nil).Handle(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if err := New(&gotAttrs, nil).HandleAttrs(ctx, at, level, msg, attrs); err != nil {
			t.Fatal(err)
		}
		if gotRecord.String() != want.String() {
			t.Fatalf("record %d: Handle wrote\n%s\nslog wrote\n%s", i, gotRecord.String(), want.String())
		}
		if gotAttrs.String() != want.String() {
			t.Fatalf("record %d: HandleAttrs wrote\n%s\nslog wrote\n%s", i, gotAttrs.String(), want.String())
		}
	}
}

// TestHandlerDerived checks that handlers made by WithAttrs and WithGroup
// write as slog's do, to the same writer, and that Enabled is the level's.
func TestHandlerDerived(t *testing.T) {
	t.Parallel()
	var got, want bytes.Buffer
	h, s := New(&got, slog.LevelWarn), slog.NewJSONHandler(&want, &slog.HandlerOptions{Level: slog.LevelWarn})
	ctx := context.Background()
	if h.Enabled(ctx, slog.LevelInfo) || !h.Enabled(ctx, slog.LevelWarn) {
		t.Errorf("Enabled(info), Enabled(warn) = %v, %v; want false, true", h.Enabled(ctx, slog.LevelInfo), h.Enabled(ctx, slog.LevelWarn))
	}
	at := time.Date(2026, 12, 7, 3, 4, 5, 0, time.UTC)
	for _, pair := range [][2]slog.Handler{{h, s}, {h.WithAttrs([]slog.Attr{slog.String("c", "d")}), s.WithAttrs([]slog.Attr{slog.String("c", "d")})},
		{h.WithGroup("grp"), s.WithGroup("grp")}} {
		for i, hh := range pair {
			rec := slog.NewRecord(at, slog.LevelError, "m", 0)
			rec.AddAttrs(slog.Float64("f", 1e-7), slog.String("s", "<x>"))
			if err := hh.Handle(ctx, rec); err != nil {
				t.Fatalf("handler %d: %v", i, err)
			}
		}
	}
	if got.String() != want.String() || strings.Count(got.String(), "\n") != 3 {
		t.Errorf("wrote\n%s\nslog wrote\n%s", got.String(), want.String())
	}
}

func BenchmarkAccessLine(b *testing.B) {
	at := time.Date(2026, 12, 7, 3, 4, 5, 123456000, time.UTC)
	attrs := []slog.Attr{slog.String("request_id", "01JEXAMPLE0000000000000000"), slog.String("method", "POST"),
		slog.String("path", "/v1/chat/completions"), slog.Int("status", 200), slog.Float64("duration_ms", 1.234),
		slog.String("key_id", "key_d108e6f885b5"), slog.String("key_name", "bench"), slog.String("endpoint", "chat"),
		slog.String("model", "gpt-4o-mini"), slog.Bool("stream", false), slog.String("outcome", "ok"),
		slog.String("candidate", "mock/gpt-4o-mini"), slog.Int("attempts", 1), slog.Float64("queue_wait_ms", 0.012),
		slog.Float64("upstream_ms", 0.9), slog.Int64("tokens_in", 12), slog.Int64("tokens_out", 80)}
	ctx := context.Background()
	b.Run("slog", func(b *testing.B) {
		h := slog.NewJSONHandler(discard{}, nil)
		b.ReportAllocs()
		for b.Loop() {
			rec := slog.NewRecord(at, slog.LevelInfo, "request", 0)
			rec.AddAttrs(attrs...)
			_ = h.Handle(ctx, rec)
		}
	})
	b.Run("jsonlog", func(b *testing.B) {
		h := New(discard{}, nil)
		b.ReportAllocs()
		for b.Loop() {
			_ = h.HandleAttrs(ctx, at, slog.LevelInfo, "request", attrs)
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
