package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// snapshotServer serves the console's stream: one snapshot, then
// nothing until the client goes.
func snapshotServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/console/api/events" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: 1\nevent: snapshot\ndata: {\"seq\":1,\"models\":[{\"name\":\"chat\",\"scopes\":[\"pm:up/chat\"],\"in_flight\":2,\"limit\":2,\"queued\":7,\"p99_ms\":1500},"+
			"{\"name\":\"embed\",\"scopes\":[],\"shares\":[\"node:n1/gpu\"]}],"+
			"\"shared\":[{\"scope\":\"node:n1/gpu\",\"models\":[\"chat\",\"embed\"],\"in_flight\":4,\"limit\":4,\"queued\":6}],"+
			"\"requests\":{\"waiting\":7,\"in_flight\":6},"+
			"\"scopes\":[{\"name\":\"pm:up/chat\",\"limit\":2,\"in_flight\":2,\"waiting\":7}]}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestWatchQueuesRedrawsFromTheStream: --watch on a terminal redraws
// each snapshot of the console's stream (models, shared scopes, scopes,
// requests counted once) in place, and stops with its context.
func TestWatchQueuesRedrawsFromTheStream(t *testing.T) {
	t.Parallel()
	srv := snapshotServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	out := &drawnWriter{drawn: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- watchQueues(ctx, out, srv.URL, "tok", false, time.Millisecond, true) }()
	<-out.drawn
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := out.buf.String()
	for _, want := range []string{"\x1b[2J", "chat", "1.5s", "pm:up/chat", "node:n1/gpu  chat, embed", "7 waiting and 6 in flight in all"} {
		if !strings.Contains(got, want) {
			t.Errorf("the watch drew no %q:\n%s", want, got)
		}
	}
}

// TestWatchQueuesInAPipe: `weir queues --watch | ...` writes each
// snapshot as plain lines under a time stamp: no escape code reaches the
// pipe.
func TestWatchQueuesInAPipe(t *testing.T) {
	t.Parallel()
	srv := snapshotServer(t)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	if isTerminal(pw) {
		t.Fatal("a pipe taken for a terminal")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	read := make(chan []byte, 1)
	go func() {
		var got []byte
		buf := make([]byte, 4096)
		for {
			n, err := pr.Read(buf)
			got = append(got, buf[:n]...)
			if bytes.Contains(got, []byte("pm:up/chat  2")) {
				cancel() // one snapshot drawn: stop
			}
			if err != nil {
				read <- got
				return
			}
		}
	}()
	cmd := queuesCmd()
	cmd.SetOut(pw)
	cmd.SetArgs([]string{"--watch", "--addr", srv.URL, "--token", "tok", "--interval", "1ms"})
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	got := <-read
	if i := bytes.IndexByte(got, 0x1b); i >= 0 {
		t.Fatalf("an escape code in the pipe at byte %d:\n%q", i, got)
	}
	for _, want := range []string{"--- weir queues --watch", "MODEL", "pm:up/chat"} {
		if !bytes.Contains(got, []byte(want)) {
			t.Errorf("the pipe got no %q:\n%s", want, got)
		}
	}
}

// drawnWriter closes drawn at the first write that draws the scopes.
type drawnWriter struct {
	buf   bytes.Buffer
	drawn chan struct{}
	once  bool
}

func (w *drawnWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	if !w.once && bytes.Contains(p, []byte("pm:up/chat")) {
		w.once = true
		close(w.drawn)
	}
	return len(p), nil
}
