package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// clientWriter writes an answer to the client with a deadline on every
// write and flush, so that a client that stops reading loses its answer
// after the write timeout instead of holding the request (and, for a
// stream, the upstream call and its lease) forever.
type clientWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration // <= 0: no deadline
	armed   bool
}

// writeChunk bounds one write: a deadline covers each piece this large,
// so that a large answer to a slow but live client is not cut short.
const writeChunk = 64 << 10

// arm sets the deadline for the next write. Deadlines on a connection are
// wall-clock times, hence time.Now rather than the injected clock.
func (cw *clientWriter) arm() {
	if cw.timeout > 0 && cw.rc.SetWriteDeadline(time.Now().Add(cw.timeout)) == nil {
		cw.armed = true
	}
}

func (cw *clientWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := min(len(p), writeChunk)
		cw.arm()
		m, err := cw.w.Write(p[:k])
		n += m
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}

// Flush sends what is buffered; a writer that cannot flush is not an
// error (the answer goes out at the end).
func (cw *clientWriter) Flush() error {
	cw.arm()
	if err := cw.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// clearDeadline lifts the deadline, which would otherwise outlive the
// request on a kept-alive connection.
func (cw *clientWriter) clearDeadline() {
	if cw.armed {
		_ = cw.rc.SetWriteDeadline(time.Time{})
	}
}

// streamError ends a started SSE stream with an error event in OpenAI's
// error shape, which OpenAI's SDKs raise as an error.
func (cw *clientWriter) streamError(code Code, msg string) {
	entry := codeTable[code]
	b, _ := json.Marshal(errorBody{Error: errorDetail{Message: msg, Type: entry.typ, Code: string(code)}})
	b = append(append([]byte("data: "), b...), "\n\n"...)
	if _, err := cw.Write(b); err == nil {
		_ = cw.Flush()
	}
}
