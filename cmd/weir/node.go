package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/gcfloor"
	"github.com/weir-gateway/weir/node"
	"github.com/weir-gateway/weir/serve"
	"github.com/weir-gateway/weir/tracing"
)

func init() { rootCmd.AddCommand(nodeCmd()) }

func nodeCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Run an edge node: serve local model runtimes to a gateway",
		Long: `Run the edge node agent described by a node config file (see
examples/node.yaml): dial the gateway's edge listener, register the local
OpenAI-compatible runtimes (vLLM, llama.cpp, Ollama) and serve the runs the
gateway admits to them. An unreachable gateway is retried with backoff,
each failed attempt logged. SIGINT or SIGTERM stops taking runs, lets those
in flight finish for up to shutdown_timeout, and exits; a second signal
exits at once. See 'go doc github.com/weir-gateway/weir/node'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.LoadNode(path)
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("%w (give the node config with -c FILE; examples/node.yaml documents every setting)", err)
			}
			if err != nil {
				return err
			}
			return runNode(cmd.Context(), cfg)
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "node.yaml", "node config file")
	return cmd
}

// runNode runs the agent until SIGINT or SIGTERM, then drains it.
func runNode(ctx context.Context, cfg *config.NodeConfig) error {
	ncfg, err := agentConfig(cfg, rootCmd.Version)
	if err != nil {
		return err
	}
	log := serve.NewLogger(cfg.LogLevel)
	defer gcfloor.Start(cfg.HeapFloor, log)()
	deps := node.Deps{Logger: log}
	// The node traces the runs of traced gateway calls when the OTEL_*
	// environment asks for traces, as weir serve does.
	tp, err := tracing.New(ctx, tracing.Config{ServiceName: "weir-node"})
	if err != nil {
		return err
	}
	if tp != nil {
		deps.Tracing = tp.TracerProvider()
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = tp.Shutdown(sctx)
		}()
	}
	a, err := node.New(ncfg, deps)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		// A second signal takes its default course: the process ends.
		stop()
		log.Info("node: shutting down", "shutdown_timeout", cfg.ShutdownTimeout.String())
	}()
	return a.Run(ctx)
}

// agentConfig is the agent's config from the file's: the TLS
// configuration built, the shutdown bound given (0 in the file: none).
func agentConfig(cfg *config.NodeConfig, version string) (node.Config, error) {
	nc := node.Config{
		Gateway:      cfg.Gateway,
		Token:        cfg.Token,
		Version:      version,
		StallTimeout: cfg.StallTimeout,
		ProbeTimeout: cfg.ProbeTimeout,
		DrainTimeout: cfg.ShutdownTimeout,
	}
	if nc.DrainTimeout == 0 {
		nc.DrainTimeout = -1 // the agent's 0 is its default
	}
	if cfg.TLS != nil {
		t := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: cfg.TLS.ServerName}
		if cfg.TLS.CA != "" {
			pem, err := os.ReadFile(cfg.TLS.CA)
			if err != nil {
				return node.Config{}, fmt.Errorf("tls.ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return node.Config{}, fmt.Errorf("tls.ca: %s holds no PEM certificate", cfg.TLS.CA)
			}
			t.RootCAs = pool
		}
		nc.TLS = t
	}
	for _, p := range cfg.Providers {
		np := node.Provider{ID: p.ID, Adapter: p.Adapter, URL: p.URL, Slots: p.Slots,
			LongSlots: p.LongSlots, LongPromptTokens: p.LongPromptTokens}
		for _, m := range p.Models {
			np.Models = append(np.Models, node.Model{Name: m.Name, Runtime: m.Runtime})
		}
		nc.Providers = append(nc.Providers, np)
	}
	return nc, nil
}
