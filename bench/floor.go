package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/weir-gateway/weir/gateway"
)

// FloorConfig is the floor server's: ServeFloor.
type FloorConfig struct {
	Listen   string // address to listen on (127.0.0.1:0)
	Upstream string // the mock's chat completions URL, required
	Limit    int    // requests proxied at once (10)
}

// ServeFloor serves SyncWaiters' floor until SIGTERM: read the body, decode
// it, wait for one of limit slots, proxy it upstream, pass the answer on.
// It logs one line, "serving" with its address, as weir serve does.
func ServeFloor(ctx context.Context, fc FloorConfig) error {
	listen, upstream, limit := fc.Listen, fc.Upstream, fc.Limit
	if upstream == "" || limit < 1 {
		return errors.New("sync-waiters-floor: --upstream and a positive --limit are required")
	}
	h := floorHandler(upstream, limit, &http.Client{Transport: gateway.NewUpstreamTransport()})
	return serveChild(ctx, listen, &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second})
}

// serveChild is a yardstick child's life: srv on listen until SIGTERM
// (or ctx ends), with one log line, "serving" and its address, as weir
// serve logs it, which the harness waits for.
func serveChild(ctx context.Context, listen string, srv *http.Server) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	slog.New(slog.NewJSONHandler(os.Stderr, nil)).Info("serving", "addr", ln.Addr().String())
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	_ = srv.Close()
	return nil
}

// floorHandler is the floor: it reads and decodes a chat request's body,
// waits for one of limit slots (a buffered channel: blocked senders go in
// arrival order), proxies the body to upstream with client and passes the
// answer on.
func floorHandler(upstream string, limit int, client *http.Client) http.Handler {
	sem := make(chan struct{}, limit)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 10<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req struct {
			Model    string            `json:"model"`
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(body, &req); err != nil || req.Model == "" {
			http.Error(w, "bad request body", http.StatusBadRequest)
			return
		}
		select {
		case sem <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		defer func() { <-sem }()
		up, err := http.NewRequestWithContext(r.Context(), http.MethodPost, upstream, bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		up.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(up)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	})
}
