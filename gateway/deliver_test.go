package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/weir-gateway/weir/provider"
)

// endlessJSON is an answer that never ends: `{"data":"aaaa…`, read
// without allocating, counting what was read.
type endlessJSON struct{ read int64 }

func (e *endlessJSON) Read(p []byte) (int, error) {
	const head = `{"data":"`
	n := 0
	for n < len(p) {
		if e.read < int64(len(head)) {
			p[n] = head[e.read]
		} else {
			p[n] = 'a'
		}
		n++
		e.read++
	}
	return n, nil
}

// TestOversizedAnswerCostsTheCapOnce: an answer of unknown length over
// MaxResponseBytes is refused (upstream_error, its lease back) having
// allocated about the cap for reading it, not twice the cap; one that
// declares a length over it is refused without being read.
//
// Not parallel: it measures the process's allocations.
func TestOversizedAnswerCostsTheCapOnce(t *testing.T) {
	const limit = 8 << 20
	b := setup(t, setupOpts{cfg: Config{MaxResponseBytes: limit}})
	for _, tc := range []struct {
		name     string
		length   int64
		maxAlloc uint64
		maxRead  int64
	}{
		{"undeclared", -1, limit + limit/4, limit + 1},
		{"declared", 1 << 30, 1 << 20, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &endlessJSON{}
			b.setExec("up", func(context.Context, provider.Call) (*http.Response, error) {
				resp, _ := answerWith("application/json", src)
				resp.ContentLength = tc.length
				return resp, nil
			})
			c := b.chat(t)
			var out recordedAnswer
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := b.svc.Serve(t.Context(), c, &out)
			runtime.ReadMemStats(&after)
			var ge *Error
			if !errors.As(err, &ge) || ge.Category != ErrUpstream || !strings.Contains(ge.Message, "limit of 8388608 bytes") {
				t.Fatalf("Serve: %v; want upstream_error naming the limit", err)
			}
			if out.head != nil || c.Usage.Outcome != "upstream_too_large" {
				t.Errorf("head %+v, outcome %q; want nothing written, upstream_too_large", out.head, c.Usage.Outcome)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			if alloc > tc.maxAlloc {
				t.Errorf("allocated %d bytes refusing it; want at most %d (the cap is %d)", alloc, tc.maxAlloc, limit)
			}
			if src.read > tc.maxRead {
				t.Errorf("read %d bytes of it; want at most %d", src.read, tc.maxRead)
			}
			b.assertIdle(t)
		})
	}
}

// TestReadCapped: answers at or under the cap come back whole, whatever
// their declared length says and however they are cut into reads; an
// answer over it is over.
func TestReadCapped(t *testing.T) {
	t.Parallel()
	whole := bytes.Repeat([]byte("0123456789"), 10_001) // 100,010 bytes
	for _, tc := range []struct {
		name   string
		body   []byte
		size   int64
		limit  int64
		over   bool
		reader func([]byte) io.Reader
	}{
		{"declared", whole[:100_000], 100_000, 100_000, false, nil},
		{"undeclared, many chunks", whole[:100_000], -1, 100_000, false, nil},
		{"undeclared, one byte a read", whole[:70_000], -1, 100_000, false, func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) }},
		{"declared short", whole[:10], 20, 100, false, nil},
		{"declared longer than said", whole[:50], 20, 100, false, nil},
		{"empty", nil, 0, 100, false, nil},
		{"one over, undeclared", whole[:100_001], -1, 100_000, true, nil},
		{"one over, declared under", whole[:101], 10, 100, true, nil},
	} {
		// Each also read as copyBody reads, first into a pooled buffer
		// (whose bytes must not be read over by the reads after it).
		for _, spare := range [][]byte{nil, bytes.Repeat([]byte("x"), firstChunk)} {
			name := tc.name
			if spare != nil {
				name += ", spare buffer"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				var r io.Reader = bytes.NewReader(tc.body)
				if tc.reader != nil {
					r = tc.reader(tc.body)
				}
				got, over, err := readCappedInto(r, tc.size, tc.limit, spare)
				if err != nil || over != tc.over {
					t.Fatalf("readCapped: over %v, %v; want over %v", over, err, tc.over)
				}
				if !tc.over && !bytes.Equal(got, tc.body) {
					t.Errorf("read %d bytes; want the %d written", len(got), len(tc.body))
				}
			})
		}
	}
	broken := errors.New("connection reset")
	if _, _, err := readCapped(io.MultiReader(bytes.NewReader(whole), iotest.ErrReader(broken)), -1, 1<<20); !errors.Is(err, broken) {
		t.Errorf("a broken read: %v; want it", err)
	}
}

// BenchmarkReadCapped reads a ~1 KB answer of declared length, as
// copyBody reads a non-streamed one.
func BenchmarkReadCapped(b *testing.B) {
	b.ReportAllocs()
	r := bytes.NewReader(chatAnswer)
	for b.Loop() {
		r.Reset(chatAnswer)
		if body, over, err := readCapped(r, int64(len(chatAnswer)), 10<<20); err != nil || over || len(body) != len(chatAnswer) {
			b.Fatal(len(body), over, err)
		}
	}
}
