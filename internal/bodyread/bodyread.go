// Package bodyread reads an HTTP body whole into a buffer sized for the
// length it declares: a client's request that waits in the queue, an
// upstream's small JSON answer. io.ReadAll starts at 512 bytes and grows
// by half, so a body it reads holds spare capacity and, on the way, the
// copies of each growth.
package bodyread

import "io"

// maxPrealloc bounds what a declared length preallocates on the sender's
// word; a longer body grows the buffer as it arrives, as io.ReadAll does.
const maxPrealloc = 16 << 10

// Read reads r to its end or, if limit is not negative, to limit bytes,
// whichever comes first, as io.ReadAll(io.LimitReader(r, limit)) does
// (io.ReadAll(r) without a limit), and returns the same error. The
// buffer is sized for declared (not known: -1), one byte more, so that
// the read that sees the end needs no growth.
func Read(r io.Reader, declared, limit int64) ([]byte, error) {
	size := int64(512)
	if declared > 0 {
		size = min(declared, maxPrealloc) + 1
	}
	if limit >= 0 {
		size = min(size, limit)
	}
	b := make([]byte, 0, size)
	for limit < 0 || int64(len(b)) < limit {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		end := cap(b)
		if limit >= 0 {
			end = int(min(int64(end), limit))
		}
		n, err := r.Read(b[len(b):end])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
	return b, nil
}
