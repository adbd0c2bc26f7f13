// Package jsonlog is slog's JSON handler with a shorter way to the same
// bytes for a line of plain attributes: strings, numbers, booleans,
// durations and times, none in a group. slog.JSONHandler writes each
// attribute through its general machinery (a Record that holds more than
// five attributes on the heap, a Value resolved, a ReplaceAttr checked
// for, a float through encoding/json); a request's access log line is
// twenty such attributes a request. Handler writes those lines itself,
// byte for byte as slog.JSONHandler would (the tests compare them), and
// hands everything else to the slog.JSONHandler inside it: attributes
// of another kind, groups, handlers made by WithAttrs and WithGroup.
package jsonlog

import (
	"context"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/weir-gateway/weir/internal/fastjson"
)

// Handler writes JSON lines as slog.JSONHandler does, without ReplaceAttr
// or AddSource.
type Handler struct {
	json *slog.JSONHandler
	out  *lockedWriter
}

var _ slog.Handler = (*Handler)(nil)

// New returns a Handler that writes lines to w, of level and above
// (nil: info and above, as slog's).
func New(w io.Writer, level slog.Leveler) *Handler {
	out := &lockedWriter{w: w}
	return &Handler{json: slog.NewJSONHandler(out, &slog.HandlerOptions{Level: level}), out: out}
}

// lockedWriter makes one line's write whole against the others', those
// of the slog.JSONHandler inside (and of its derived handlers) and
// Handler's own.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Enabled reports whether the handler writes records at level l.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.json.Enabled(ctx, l) }

// WithAttrs returns slog.JSONHandler's handler with attrs, writing to the
// same writer.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler { return h.json.WithAttrs(attrs) }

// WithGroup returns slog.JSONHandler's handler with the group, writing to
// the same writer.
func (h *Handler) WithGroup(name string) slog.Handler { return h.json.WithGroup(name) }

// Handle writes r's line.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if !plainTime(r.Time) {
		return h.json.Handle(ctx, r)
	}
	b := start(r.Time, r.Level, r.Message)
	plain := true
	r.Attrs(func(a slog.Attr) bool {
		*b, plain = appendPlain(*b, a)
		return plain
	})
	if !plain {
		drop(b)
		return h.json.Handle(ctx, r)
	}
	return h.finish(b)
}

// HandleAttrs writes the line of a record made at t, of level, with msg
// and attrs, as Handle writes it, without the record: a Record keeps
// attributes past its fifth on the heap. The caller has checked Enabled.
func (h *Handler) HandleAttrs(ctx context.Context, t time.Time, level slog.Level, msg string, attrs []slog.Attr) error {
	if !plainTime(t) {
		return h.handleRecord(ctx, t, level, msg, attrs)
	}
	b := start(t, level, msg)
	for _, a := range attrs {
		var plain bool
		if *b, plain = appendPlain(*b, a); !plain {
			drop(b)
			return h.handleRecord(ctx, t, level, msg, attrs)
		}
	}
	return h.finish(b)
}

// handleRecord hands a line that is not plain to slog.JSONHandler.
func (h *Handler) handleRecord(ctx context.Context, t time.Time, level slog.Level, msg string, attrs []slog.Attr) error {
	r := slog.NewRecord(t, level, msg, 0)
	r.AddAttrs(attrs...)
	return h.json.Handle(ctx, r)
}

// plainTime reports whether slog writes t without an error: a year of
// four digits, or none at all.
func plainTime(t time.Time) bool {
	if t.IsZero() {
		return true
	}
	y := t.Year()
	return y >= 0 && y < 10000
}

// bufs are lines' buffers, reused.
var bufs = sync.Pool{New: func() any {
	b := make([]byte, 0, 1024)
	return &b
}}

// maxKept is the largest buffer put back in bufs, as slog's own.
const maxKept = 16 << 10

// start begins a line with slog's built-in attributes: time (if t is
// not zero), level, message.
func start(t time.Time, level slog.Level, msg string) *[]byte {
	b := bufs.Get().(*[]byte)
	buf := append((*b)[:0], '{')
	if !t.IsZero() {
		buf = append(buf, `"time":`...)
		buf = appendTime(buf, t.Round(0))
		buf = append(buf, ',')
	}
	buf = append(buf, `"level":`...)
	buf = appendString(buf, level.String())
	buf = append(buf, `,"msg":`...)
	buf = appendString(buf, msg)
	*b = buf
	return b
}

// finish ends the line in b, writes it, and puts b back.
func (h *Handler) finish(b *[]byte) error {
	*b = append(*b, '}', '\n')
	_, err := h.out.Write(*b)
	drop(b)
	return err
}

// drop puts b back, unwritten or written.
func drop(b *[]byte) {
	if cap(*b) <= maxKept {
		bufs.Put(b)
	}
}

// appendPlain appends a, after a comma, if Handler writes it itself: a
// non-empty key and a value of a kind that needs no resolving,
// marshaling or grouping. If it does not, plain is false and what it
// returns is of no use: the line goes to slog.JSONHandler. Checking
// each attribute as it is written reads each one's kind once.
func appendPlain(b []byte, a slog.Attr) (_ []byte, plain bool) {
	if a.Key == "" {
		return b, false // slog elides an empty attribute and inlines a group
	}
	v := a.Value
	switch v.Kind() {
	case slog.KindString:
		return appendString(appendKey(b, a.Key), v.String()), true
	case slog.KindInt64:
		return strconv.AppendInt(appendKey(b, a.Key), v.Int64(), 10), true
	case slog.KindUint64:
		return strconv.AppendUint(appendKey(b, a.Key), v.Uint64(), 10), true
	case slog.KindFloat64:
		f := v.Float64()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return b, false // encoding/json refuses these
		}
		return fastjson.AppendFloat(appendKey(b, a.Key), f), true // as encoding/json, which slog calls
	case slog.KindBool:
		return strconv.AppendBool(appendKey(b, a.Key), v.Bool()), true
	case slog.KindDuration:
		return strconv.AppendInt(appendKey(b, a.Key), int64(v.Duration()), 10), true
	case slog.KindTime:
		t := v.Time()
		if !plainTime(t) {
			return b, false
		}
		return appendTime(appendKey(b, a.Key), t), true
	}
	return b, false
}

// appendKey appends a comma and key, quoted, and its colon.
func appendKey(b []byte, key string) []byte {
	b = append(b, ',')
	b = appendString(b, key)
	return append(b, ':')
}

// appendTime appends t quoted in RFC 3339 with nanoseconds, as slog.
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

const hex = "0123456789abcdef"

// plainByte holds the bytes appendString copies as they are: ASCII from
// the space on, but for the quote and the backslash.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendString appends s quoted and escaped as slog's JSON handler
// escapes it: unlike encoding/json it leaves HTML's <, > and & as they
// are, and writes \b and \f as \u escapes.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if plainByte[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
