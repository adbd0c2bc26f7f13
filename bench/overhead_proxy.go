package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/weir-gateway/weir/gateway"
)

// plainProxy is the plain proxy to the mock at mockURL: an
// httputil.ReverseProxy with httpapi's upstream transport, so that it
// differs from Weir only in what Weir does. Like Weir, and like a reverse
// proxy that buffers requests (nginx's proxy_request_buffering), it reads
// the request's body before it goes upstream: Go's server closes an
// inbound body once the answer's headers go out, and a transport still
// reading that body to its end then fails the request, closing its
// upstream connection under the answer it is copying (golang/go#40747;
// the client sees "unexpected EOF" on a stream).
func plainProxy(mockURL string) http.Handler {
	target, _ := url.Parse(mockURL)
	rp := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport: gateway.NewUpstreamTransport(),
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 10<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		rp.ServeHTTP(w, r)
	})
}

// ProxyConfig is the proxy child's: ServeProxy.
type ProxyConfig struct {
	Listen   string // address to listen on (127.0.0.1:0)
	Upstream string // the mock's base URL, required
}

// ServeProxy serves Overhead's plain proxy (plainProxy) in front of
// Upstream until SIGTERM, as the proxy target of OverheadConfig.OutOfProcess
// runs it: a process of its own, so that its CPU time and memory are its
// alone. It logs one line, "serving" with its address, as weir serve does.
func ServeProxy(ctx context.Context, pc ProxyConfig) error {
	if pc.Upstream == "" {
		return errors.New("overhead-proxy: --upstream is required")
	}
	return serveChild(ctx, pc.Listen, &http.Server{Handler: plainProxy(pc.Upstream), ReadHeaderTimeout: 10 * time.Second})
}
