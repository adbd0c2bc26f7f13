package mock

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// Transport serves requests with h in this process, with no network: the
// response starts when h writes its header, and its body streams as h
// writes and flushes it. The gateway's simulation run mode answers
// upstream calls with a Server through it. Closing the response's body,
// or the request's context ending, ends h's request context.
func Transport(h http.Handler) http.RoundTripper { return handlerTransport{h} }

type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	ctx, cancel := context.WithCancel(req.Context())
	in := req.Clone(ctx)
	in.Body = io.NopCloser(bytes.NewReader(body))
	in.ContentLength = int64(len(body))
	in.RequestURI = req.URL.RequestURI()
	pr, pw := io.Pipe()
	w := &pipeWriter{header: make(http.Header), pw: pw, started: make(chan struct{})}
	resp := &http.Response{Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: req, ContentLength: -1}
	go func() {
		t.h.ServeHTTP(w, in)
		w.WriteHeader(http.StatusOK) // a handler that wrote nothing
		_ = pw.Close()
	}()
	select {
	case <-w.started:
	case <-req.Context().Done():
		cancel()
		_ = pr.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	resp.StatusCode, resp.Status = w.status, strconv.Itoa(w.status)+" "+http.StatusText(w.status)
	resp.Header = w.sent
	if n, err := strconv.ParseInt(resp.Header.Get("Content-Length"), 10, 64); err == nil {
		resp.ContentLength = n
	}
	resp.Body = &endingBody{ReadCloser: pr, cancel: cancel}
	return resp, nil
}

// endingBody ends the handler's request when the response's reader
// closes it.
type endingBody struct {
	io.ReadCloser
	cancel func()
}

func (b *endingBody) Close() error {
	b.cancel()
	return b.ReadCloser.Close()
}

// pipeWriter is the handler's ResponseWriter: its header once written,
// its body into a pipe the response reads.
type pipeWriter struct {
	header  http.Header
	sent    http.Header
	pw      *io.PipeWriter
	once    sync.Once
	status  int
	started chan struct{}
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(status int) {
	w.once.Do(func() {
		w.status, w.sent = status, w.header.Clone()
		close(w.started)
	})
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(p)
}

// Flush is a no-op: every Write reaches the reader as it is made.
func (w *pipeWriter) Flush() {}
