package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
)

// TestServerEdgeSettings: the server section's timeouts and admin
// settings reach the running server: an idle keep-alive connection is
// closed after idle_timeout, a stalled body is answered 408 after
// body_timeout, and with an admin token and metrics_auth both /admin and
// /metrics want the token.
func TestServerEdgeSettings(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{})
	const token = "adm_e2e"
	g := startGateway(t, "  idle_timeout: 300ms\n  body_timeout: 300ms\n  admin_token: "+token+"\n  metrics_auth: true\n", oneModel(up.URL, ""))
	_, key := g.createKey(t)
	addr := strings.TrimPrefix(g.URL, "http://")

	dial := func() (net.Conn, *bufio.Reader) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		return conn, bufio.NewReader(conn)
	}

	t.Run("idle connection closed", func(t *testing.T) {
		conn, br := dial()
		_, _ = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: weir\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("idle connection: %v; want it closed by the server", err)
		}
	})

	t.Run("stalled body cut off", func(t *testing.T) {
		conn, br := dial()
		fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: weir\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"model\":", key)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("no answer to a stalled body: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), `"request_timeout"`) {
			t.Fatalf("status %d: %s; want 408 request_timeout", resp.StatusCode, body)
		}
	})

	t.Run("admin and metrics want the token", func(t *testing.T) {
		for _, path := range []string{"/admin/queues", "/metrics"} {
			if rep := g.do(t, request{Method: http.MethodGet, Path: path}); rep.Status != http.StatusUnauthorized {
				t.Errorf("GET %s without the token: status %d, want 401", path, rep.Status)
			}
			if rep := g.do(t, request{Method: http.MethodGet, Path: path, Key: token}); rep.Status != http.StatusOK {
				t.Errorf("GET %s with the token: status %d, want 200", path, rep.Status)
			}
		}
	})
}
