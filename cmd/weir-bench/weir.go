package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/bench"
	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/serve"
	"github.com/weir-gateway/weir/tracing"
)

// harness is what the commands share: --weir, and how package bench
// reaches Weir.
type harness struct {
	// weirPath is --weir: the weir binary for the `weir serve` children.
	weirPath string
}

// weir is how package bench reaches Weir for cmd (benchWeir), with, if
// the scenario runs `weir serve` children, the weir binary (findWeir),
// which cleanup removes if it was built for this run.
func (h *harness) weir(cmd *cobra.Command, children bool) (w bench.Weir, cleanup func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return bench.Weir{}, nil, fmt.Errorf("find this binary: %w", err)
	}
	w = benchWeir(self)
	if !children {
		return w, func() {}, nil
	}
	if w.Exe, cleanup, err = findWeir(cmd.Context(), h.weirPath, self); err != nil {
		return bench.Weir{}, nil, err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "weir-bench: the 'weir serve' children run %s\n", w.Exe)
	return w, cleanup, nil
}

// benchWeir is how package bench reaches Weir, less the weir binary:
// serve.Main for the gateway in this process, and self, this binary, for
// sync-waiters' floor.
func benchWeir(self string) bench.Weir {
	return bench.Weir{
		ServeArgs: []string{"serve"},
		FloorExe:  self,
		FloorArgs: []string{"sync-waiters-floor"},
		ProxyArgs: []string{"overhead-proxy"},
		Start:     startBenchGateway,
		StartTraced: func(ctx context.Context, cfg *config.Config, otlpURL string) (bench.Gateway, error) {
			p, err := tracing.New(ctx, tracing.Config{Endpoint: otlpURL})
			if err != nil {
				return nil, err
			}
			return startGateway(ctx, &serve.Main{Config: cfg, Logger: serve.NewLogger(cfg.Server.LogLevel), Tracing: p})
		},
		CreateKey: serve.CreateKey,
		CreateNode: func(ctx context.Context, store weir.NodeStore, name string) (weir.Node, string, error) {
			return serve.CreateNode(ctx, store, name, time.Now())
		},
	}
}

// tracingEnv checks, for --tracing, that the OTEL_* environment
// (getenv) leaves the untraced gateways untraced: serve.Main would
// otherwise trace weir and weir' too, and the comparison would be of
// tracing against tracing. It warns on out if a sampler is set: the
// traced gateway samples as it says, not every request.
func tracingEnv(out io.Writer, getenv func(string) string) error {
	on, err := tracing.Enabled(getenv)
	if err != nil {
		return fmt.Errorf("--tracing: %w", err)
	}
	if on {
		return errors.New("--tracing: the OTEL_* environment turns tracing on for every gateway, the untraced weir and weir' too; " +
			"unset OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and OTEL_TRACES_EXPORTER (weir+trace exports to a receiver of its own)")
	}
	if v := getenv("OTEL_TRACES_SAMPLER"); v != "" {
		fmt.Fprintf(out, "weir-bench: OTEL_TRACES_SAMPLER=%s: weir+trace samples as it says, not every request\n", v)
	}
	return nil
}

// weirPackage is the weir command, which findWeir builds.
const weirPackage = "github.com/weir-gateway/weir/cmd/weir"

// findWeir finds the weir binary that the scenarios run as `weir serve`
// children:
//
//   - path, when given (--weir);
//   - else the weir in self's directory, where `go build -o DIR ./cmd/weir
//     ./cmd/weir-bench` puts the two;
//   - else one that go build makes from the module in the current
//     directory (the checkout `go run ./cmd/weir-bench` is run in) into a
//     temporary directory, which cleanup removes.
//
// Never a weir on PATH: it may be another commit's build, and the figures
// would be its, not this checkout's.
func findWeir(ctx context.Context, path, self string) (exe string, cleanup func(), err error) {
	none := func() {}
	if path != "" {
		if exe, err = exec.LookPath(path); err != nil {
			return "", nil, fmt.Errorf("--weir: %w", err)
		}
		if abs, err := filepath.Abs(exe); err == nil {
			exe = abs
		}
		return exe, none, nil
	}
	name := "weir"
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	beside := filepath.Join(filepath.Dir(self), name)
	if fi, err := os.Stat(beside); err == nil && !fi.IsDir() {
		return beside, none, nil
	}
	dir, err := os.MkdirTemp("", "weir-bench-weir-")
	if err != nil {
		return "", nil, err
	}
	exe = filepath.Join(dir, name)
	out, err := exec.CommandContext(ctx, "go", "build", "-o", exe, weirPackage).CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("no weir binary for the 'weir serve' children: none beside %s, and go build %s here failed "+
			"(run weir-bench from a checkout of Weir, or give the binary with --weir PATH): %w\n%s", self, weirPackage, err, out)
	}
	return exe, func() { os.RemoveAll(dir) }, nil
}

// benchGateway is serve.Main as bench.Gateway.
type benchGateway struct{ *serve.Main }

var _ bench.Gateway = benchGateway{}

func (g benchGateway) Store() weir.Store { return g.DB }

func (g benchGateway) NodeStore() weir.NodeStore { return g.DB }

func (g benchGateway) Scopes(ctx context.Context) []admission.ScopeStats {
	return g.Engine.Scopes(ctx)
}

// startBenchGateway starts the gateway on cfg in this process, as `weir
// serve` assembles it.
func startBenchGateway(ctx context.Context, cfg *config.Config) (bench.Gateway, error) {
	return startGateway(ctx, &serve.Main{Config: cfg, Logger: serve.NewLogger(cfg.Server.LogLevel)})
}

// startGateway starts m and returns it once it serves.
func startGateway(ctx context.Context, m *serve.Main) (bench.Gateway, error) {
	if err := m.Start(ctx); err != nil {
		_ = m.Stop(context.Background())
		return nil, err
	}
	return benchGateway{m}, nil
}
