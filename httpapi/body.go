package httpapi

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"
)

// requestBody is a request's body as the handlers read it.
//
// It bounds the reading with a read deadline on the connection
// (Config.BodyTimeout): set at the first read, cleared at the end, so a
// slow body is cut off while the answer, a long stream say, is not
// (http.Server's ReadTimeout and WriteTimeout would bound the whole
// exchange).
//
// It knows whether the body was read to its end, so that an answer
// written before then closes the connection instead of making the server
// read what is left: net/http reads up to 256 KiB of an unread body
// before it writes an answer, and a body that never ends would hold the
// answer back for ever.
type requestBody struct {
	io.ReadCloser
	// w is the request's writer, whose connection the deadline is set
	// on (readDeadline).
	w       http.ResponseWriter
	timeout time.Duration // 0: no deadline
	// Only the handler's goroutine reads the body and writes the answer.
	started, ended, sawEOF bool
}

func (b *requestBody) Read(p []byte) (int, error) {
	if !b.started {
		b.started = true
		if b.timeout > 0 {
			// A socket deadline is wall-clock time, whatever clock the
			// server is given.
			b.readDeadline(time.Now().Add(b.timeout))
		}
	}
	n, err := b.ReadCloser.Read(p)
	if err != nil && !b.ended {
		b.ended = true
		b.sawEOF = err == io.EOF
		if b.timeout > 0 {
			b.readDeadline(time.Time{})
		}
	}
	return n, err
}

// readDeadline sets the connection's read deadline. Its controller is
// made here, where it stays on the stack, rather than held with the
// body: the middleware that makes the body is inlined into a function
// too large for http.NewResponseController to be inlined in turn, so a
// controller made there is an allocation a request.
func (b *requestBody) readDeadline(t time.Time) {
	_ = http.NewResponseController(b.w).SetReadDeadline(t)
}

// unread reports whether some of the body may still be on the wire.
func (b *requestBody) unread() bool { return b != nil && !b.sawEOF }

// bodyTimedOut reports whether err is a body's read deadline passing.
func bodyTimedOut(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
