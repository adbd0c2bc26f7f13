package httpapi

import (
	"io"
)

// requestBody is a request's body as the handlers read it. It knows
// whether the body was read to its end, so that an answer written before
// then closes the connection instead of making the server read what is
// left: net/http reads up to 256 KiB of an unread body before it writes
// an answer, and a body that never ends would hold the answer back for
// ever.
type requestBody struct {
	io.ReadCloser
	// Only the handler's goroutine reads the body and writes the answer.
	ended, sawEOF bool
}

func (b *requestBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !b.ended {
		b.ended = true
		b.sawEOF = err == io.EOF
	}
	return n, err
}

// unread reports whether some of the body may still be on the wire.
func (b *requestBody) unread() bool { return b != nil && !b.sawEOF }
