package serve

import (
	"net/http"
	"strings"
	"testing"

	"github.com/weir-gateway/weir/config"
)

// TestServeAccessLogSetting: server.access_log, on by default, logs a
// line for each request; false logs none.
func TestServeAccessLogSetting(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		cfg := config.Default()
		cfg.Server.Listen = "127.0.0.1:0"
		cfg.Server.AccessLog = on
		m, _, logs, err := startMain(t, cfg)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get("http://" + m.Addr() + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if got := strings.Contains(logs.String(), `"msg":"request","request_id":`); got != on {
			t.Errorf("access_log %v: a request line logged %v; log:\n%s", on, got, logs)
		}
	}
}
