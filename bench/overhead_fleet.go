package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/bench/pgbench"
	"github.com/weir-gateway/weir/loadgen"
)

// overheadCatalogYAML is overheadCatalog as a config file's catalog, for
// the gateways Overhead runs as children: the same platform, platform
// model, model and group, with the same limits.
func overheadCatalogYAML(mockURL string) string {
	return fmt.Sprintf(`platforms:
  - name: mock
    base_url: %s
    responses: translate
platform_models:
  - name: %s
    platform: mock
    upstream: gpt-4o-mini
    concurrency: %d
    queue_limit: %d
models:
  - name: gpt-4o-mini
    kind: chat
    nodes: never
    candidates:
      - platform_model: %s
        weight: 1
groups:
  - name: default
    round_robin: true
    concurrency: %d
`, mockURL, chatPM, generous, generous, chatPM, generous)
}

// overheadServer is the server section's lines beyond serveFile's, as
// overheadCatalog sets them.
const overheadServer = "  default_max_wait: 60s\n"

// startFleetTargets starts the targets serve and fleet (see
// OverheadConfig.Fleet) and adds them to rig.
func startFleetTargets(ctx context.Context, c OverheadConfig, rig *overheadRig, dir, mockURL string) error {
	catalog := overheadCatalogYAML(mockURL)
	key := func() *weir.APIKey {
		return &weir.APIKey{Name: "bench", Group: "default", Limits: weir.Limits{Concurrency: generous}}
	}
	serve, secret, err := startSQLiteServe(ctx, c.Weir, dir, overheadServer, catalog, key())
	if err != nil {
		return err
	}
	rig.serve = serve
	rig.closers = append(rig.closers, serve.stop)
	f, err := startFleet(ctx, fleetParams{Weir: c.Weir, Fleet: c.Fleet, Dir: dir, Server: overheadServer, Rest: catalog, Key: key()})
	if err != nil {
		return err
	}
	rig.fleet = f
	rig.closers = append(rig.closers, f.stop)
	header := func(secret string) http.Header {
		return http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + secret}}
	}
	const chat = "/v1/chat/completions"
	var urls []string
	for _, u := range f.urls() {
		urls = append(urls, u+chat)
	}
	rig.targets = append(rig.targets,
		overheadTarget{name: "serve", urls: []string{serve.url + chat}, header: header(secret), procs: []*child{serve}},
		overheadTarget{name: "fleet", urls: urls, header: header(f.secret), procs: f.replicas},
	)
	return nil
}

// procsCPU is the CPU time the processes have used.
func procsCPU(ps []*child) time.Duration {
	var d time.Duration
	for _, p := range ps {
		d += cpuTime(p.cmd.Process.Pid)
	}
	return d
}

// fleetAdmit is docs/benchmarks.md's fleet-admit at the HTTP level, after
// the fleet's closed loop: each request was one admission (three scopes
// at once) and its release, so the fleet's sustained req/s is its
// admissions per second; pgbench then runs on the same server for as
// long, and the line gives the ratio.
func fleetAdmit(ctx context.Context, out io.Writer, c OverheadConfig, rig *overheadRig, res loadgen.Result) error {
	pg, err := pgbench.Run(ctx, pgbench.Config{DSN: c.Fleet.DSN, Clients: 8, Jobs: 2, Duration: c.Duration})
	if err != nil {
		return err
	}
	admits := res.Throughput()
	r := admits / pg.TPS
	verdict := "met"
	if !(r >= 1) {
		verdict = "missed"
	}
	fmt.Fprintf(out, "fleet-admit (HTTP level) %d replicas  %.0f admissions/s (a request's 3 scopes at once, with its release; %.3f%% ok)  pgbench %.0f tps (8 clients, %s, %d failed)  x-pgbench %.2fx (target >= 1x: %s)\n",
		len(rig.fleet.replicas), admits, 100*res.SuccessRatio(), pg.TPS, pg.Duration, pg.Failed, r, verdict)
	return nil
}
