package bodyread

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestRead reads bodies of every length whole, into a buffer that fits
// a declared length rather than io.ReadAll's spare capacity, and trusts a
// declared length no further than its preallocation bound.
func TestRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		size     int
		declared int64
		maxSpare int // most spare capacity allowed; -1 for no check
	}{
		{"empty", 0, 0, -1},
		{"small declared", 151, 151, 16},
		{"small undeclared", 151, -1, -1},
		{"declared at the bound", 16 << 10, 16 << 10, 16},
		{"declared past the bound", 100 << 10, 100 << 10, -1},
		{"undeclared large", 100 << 10, -1, -1},
		{"declared more than sent", 10, 4 << 10, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want := bytes.Repeat([]byte("x"), tc.size)
			// A one-byte reader makes every growth step run.
			got, err := Read(iotest.OneByteReader(bytes.NewReader(want)), tc.declared, -1)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("read %d bytes, want %d", len(got), len(want))
			}
			if tc.maxSpare >= 0 && cap(got)-len(got) > tc.maxSpare {
				t.Errorf("buffer of %d bytes holds %d: %d spare, want at most %d", cap(got), len(got), cap(got)-len(got), tc.maxSpare)
			}
		})
	}
	t.Run("error", func(t *testing.T) {
		t.Parallel()
		boom := errors.New("boom")
		if _, err := Read(io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom)), 10, -1); !errors.Is(err, boom) {
			t.Fatalf("err %v, want %v", err, boom)
		}
	})
}

// With a limit, Read reads what io.ReadAll(io.LimitReader(r, limit))
// reads, whatever the length declared, and returns the same error.
func TestReadLimited(t *testing.T) {
	t.Parallel()
	const limit = 1000
	boom := errors.New("boom")
	readers := map[string]func([]byte) io.Reader{
		"whole":    func(b []byte) io.Reader { return bytes.NewReader(b) },
		"one byte": func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) },
		"data+EOF": func(b []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(b)) },
		"failing":  func(b []byte) io.Reader { return io.MultiReader(bytes.NewReader(b), iotest.ErrReader(boom)) },
	}
	for _, n := range []int{0, 1, 440, 511, 512, 513, 999, 1000, 1001, 1500} {
		body := bytes.Repeat([]byte("v"), n)
		for name, reader := range readers {
			want, werr := io.ReadAll(io.LimitReader(reader(body), limit))
			for _, length := range []int64{-1, int64(n), 0, int64(n) / 2, int64(n) + 7, 2 * limit} {
				got, err := Read(reader(body), length, limit)
				if !bytes.Equal(got, want) || !errors.Is(err, werr) || (err == nil) != (werr == nil) {
					t.Errorf("%d bytes, %s, length %d: %d bytes, %v; want %d, %v", n, name, length, len(got), err, len(want), werr)
				}
			}
		}
	}
}

// A body of the length it declares is read into one buffer of its size.
// Not parallel: AllocsPerRun counts the process's allocations.
func TestReadAllocations(t *testing.T) {
	body := bytes.Repeat([]byte("v"), 440)
	r := bytes.NewReader(body)
	var err error
	n := testing.AllocsPerRun(100, func() {
		r.Reset(body)
		_, err = Read(r, int64(len(body)), 1<<20+1)
	})
	if n != 1 || err != nil {
		t.Errorf("Read: %v allocations, %v; want 1", n, err)
	}
}
