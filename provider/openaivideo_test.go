package provider

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// readAtMost reads what io.ReadAll(io.LimitReader(r, limit)) reads,
// whatever the length declared, and returns the same error.
func TestReadAtMost(t *testing.T) {
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
				got, err := readAtMost(reader(body), length, limit)
				if !bytes.Equal(got, want) || !errors.Is(err, werr) || (err == nil) != (werr == nil) {
					t.Errorf("%d bytes, %s, length %d: %d bytes, %v; want %d, %v", n, name, length, len(got), err, len(want), werr)
				}
			}
		}
	}
}

// A body of the length it declares is read into one buffer of its size.
// Not parallel: AllocsPerRun counts the process's allocations.
func TestReadAtMostAllocations(t *testing.T) {
	body := bytes.Repeat([]byte("v"), 440)
	r := bytes.NewReader(body)
	var err error
	n := testing.AllocsPerRun(100, func() {
		r.Reset(body)
		_, err = readAtMost(r, int64(len(body)), maxJobBody+1)
	})
	if n != 1 || err != nil {
		t.Errorf("readAtMost: %v allocations, %v; want 1", n, err)
	}
}
