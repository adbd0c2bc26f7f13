package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"github.com/spf13/cobra"
	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/serve"
)

// syncBuffer is a bytes.Buffer several goroutines may write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startMain starts the gateway on cfg as `weir serve` does, its storage
// in a temporary directory; it is stopped when the test ends.
func startMain(t *testing.T, cfg *config.Config) (*serve.Main, error) {
	t.Helper()
	cfg.Storage.Path = filepath.Join(t.TempDir(), "weir.db")
	m := &serve.Main{Config: cfg, Logger: slog.New(slog.DiscardHandler)}
	t.Cleanup(func() { _ = m.Stop(context.Background()) })
	return m, m.Start(t.Context())
}

// runKeys runs `weir keys args...` as a fresh command and returns what it
// printed and its error.
func runKeys(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return runCmd(t, keysCmd(), args...)
}

// runCmd runs cmd, made fresh, with args, and returns what it printed
// (out and err) and its error.
func runCmd(t *testing.T, cmd *cobra.Command, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	cmd.SetContext(t.Context())
	err := cmd.Execute()
	return out.String(), err
}

// closedPort is the URL of a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}
