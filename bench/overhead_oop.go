package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/weir-gateway/weir"
)

// HarnessHeapFloor is the heap floor the harness keeps under
// OverheadConfig.OutOfProcess, where it runs only the load generator and
// the mock: the same for every run, so that runs compared differ only in
// the children.
const HarnessHeapFloor = 128 << 20

// startChildTargets starts the targets proxy and weir as child processes
// (OverheadConfig.OutOfProcess) in front of the mock at mockURL: the
// plain proxy as its own process (ServeProxy) and Weir as `weir serve` on
// a SQLite file in dir, with overheadCatalog's catalog and limits and,
// if c.HeapFloorSet, c.HeapFloor as its server.heap_floor. It notes the
// weir child's key in rig and returns the proxy's URL and Weir's, with
// the processes serving each.
func startChildTargets(ctx context.Context, c OverheadConfig, rig *overheadRig, dir, mockURL string) (proxy, gw *child, err error) {
	proxyArgs := append(slices.Clone(c.Weir.ProxyArgs), "--upstream", mockURL, "--listen", rig.ports.addr())
	if c.ProfileTarget == "proxy" {
		proxyArgs = append(proxyArgs, c.profileArgs()...)
	}
	proxy, err = startChild(c.Weir.FloorExe, proxyArgs, time.Minute, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("proxy: %w", err)
	}
	rig.closers = append(rig.closers, proxy.stop)
	server := overheadServer
	if c.HeapFloorSet {
		server += fmt.Sprintf("  heap_floor: %d\n", c.HeapFloor)
	}
	rig.key = weir.APIKey{Name: "bench", Group: "default", Limits: weir.Limits{Concurrency: generous}}
	w := c.Weir
	if c.ProfileTarget == "weir" {
		w.ServeArgs = append(slices.Clone(w.ServeArgs), c.profileArgs()...)
	}
	gw, secret, err := startSQLiteServeFile(ctx, w, dir,
		serveFile{Listen: rig.ports.addr(), Server: server, Rest: overheadCatalogYAML(mockURL + "/v1")}, &rig.key)
	if err != nil {
		return nil, nil, err
	}
	rig.closers = append(rig.closers, gw.stop)
	rig.secret, rig.logLevel = secret, "info"
	return proxy, gw, nil
}

// validateOutOfProcess checks what OutOfProcess runs with: the weir
// binary and the proxy child, and none of the targets that need the
// gateway in this process.
func (c OverheadConfig) validateOutOfProcess() error {
	switch {
	case c.Edge || c.Dialects || c.Budgets || c.Tracing || c.Interleave || c.Fleet.Replicas > 0 || len(c.ConsoleWatcher) > 0:
		return errors.New("--out-of-process drives direct, proxy and weir alone: not with --edge, --dialects, --budgets, --tracing, --interleave, --fleet or --console-watcher")
	case c.Weir.FloorExe == "" || len(c.Weir.ProxyArgs) == 0:
		return errors.New("bench: Weir.FloorExe and Weir.ProxyArgs are required for --out-of-process")
	case c.MemProfile != "" && c.ProfileTarget != "direct":
		return errors.New("--out-of-process: --memprofile covers this process alone (--profile-target direct)")
	}
	return c.Weir.child()
}

// header is the headers of a request to the weir target: JSON, with the
// key's secret.
func weirHeader(secret string) http.Header {
	return http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + secret}}
}
