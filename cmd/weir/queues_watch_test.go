package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestWatchQueuesRedrawsFromTheStream: --watch draws each snapshot of
// the console's stream (models and scopes), and stops with its context.
func TestWatchQueuesRedrawsFromTheStream(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/console/api/events" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: 1\nevent: snapshot\ndata: {\"seq\":1,\"models\":[{\"name\":\"chat\",\"in_flight\":2,\"limit\":2,\"queued\":7,\"p99_ms\":1500}],"+
			"\"scopes\":[{\"name\":\"pm:up/chat\",\"limit\":2,\"in_flight\":2,\"waiting\":7}]}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	out := &drawnWriter{drawn: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- watchQueues(ctx, out, srv.URL, "tok", false, time.Millisecond) }()
	<-out.drawn
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := out.buf.String()
	for _, want := range []string{"\x1b[2J", "chat", "1.5s", "pm:up/chat"} {
		if !strings.Contains(got, want) {
			t.Errorf("the watch drew no %q:\n%s", want, got)
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
