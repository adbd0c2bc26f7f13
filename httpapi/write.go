package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/weir-gateway/weir/gateway"
)

// clientWriter writes an answer to the client with a deadline on every
// write and flush, so that a client that stops reading loses its answer
// after the write timeout instead of holding the request (and, for a
// stream, the upstream call and its lease) forever.
type clientWriter struct {
	w       http.ResponseWriter
	rc      http.ResponseController
	timeout time.Duration // <= 0: no deadline
	armed   bool
	// wrote: a write armed the deadline since the last flush, and that
	// deadline covers the flush too.
	wrote bool
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
		cw.wrote = true
		m, err := cw.w.Write(p[:k])
		n += m
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}

// Flush sends what is buffered, within the deadline of the write before
// it if there was one (a whole answer is a write and its flush: one
// deadline, not two); a writer that cannot flush is not an error (the
// answer goes out at the end).
func (cw *clientWriter) Flush() error {
	if !cw.wrote {
		cw.arm()
	}
	cw.wrote = false
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

// answerWriter is where the gateway writes an upstream's answer: it
// sets the answer's headers as it starts and bounds every write by the
// write timeout (clientWriter).
type answerWriter struct {
	clientWriter
	started bool
	status  int
	// vals back the header values Start sets, which net/http keeps as a
	// slice each: one allocation with the writer rather than one each.
	vals [5]string
}

var _ gateway.Answer = (*answerWriter)(nil)

// Start implements gateway.Answer.
func (a *answerWriter) Start(head gateway.Head) {
	h := a.w.Header()
	n := 0
	set := func(k, v string) { // k in canonical form
		a.vals[n] = v
		h[k] = a.vals[n : n+1 : n+1]
		n++
	}
	for _, kv := range [...][2]string{
		{"Content-Type", head.ContentType},
		{"Content-Disposition", head.ContentDisposition},
		{"Cache-Control", head.CacheControl},
	} {
		if kv[1] != "" {
			set(kv[0], kv[1])
		}
	}
	set(HeaderQueueWait, strconv.FormatInt(head.Waited.Milliseconds(), 10))
	if head.ContentLength >= 0 {
		set("Content-Length", strconv.FormatInt(head.ContentLength, 10))
	}
	a.w.WriteHeader(head.Status)
	a.started, a.status = true, head.Status
}

// StreamError implements gateway.Answer.
func (a *answerWriter) StreamError(err error) {
	a.streamError(answerOf(err))
}

// streamError ends a started SSE stream with an error event in OpenAI's
// error shape, which OpenAI's SDKs raise as an error.
func (cw *clientWriter) streamError(e *apiError) {
	b := append([]byte("data: "), e.JSON()...)
	b = append(b, '\n')
	if _, err := cw.Write(b); err == nil {
		_ = cw.Flush()
	}
}
