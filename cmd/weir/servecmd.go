package main

import (
	"github.com/spf13/cobra"

	"github.com/weir-gateway/weir/gcfloor"
	"github.com/weir-gateway/weir/internal/sigprof"
	"github.com/weir-gateway/weir/serve"
)

// `weir serve` runs the gateway that package serve assembles.
func init() { rootCmd.AddCommand(serveCmd()) }

func serveCmd() *cobra.Command {
	var path, listen, cpuProfile, traceFile string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the OpenAI-compatible gateway",
		Long: `Serve the OpenAI-compatible gateway described by a config file
(see examples/weir.yaml). SIGHUP reloads the catalog without dropping
in-flight work; SIGINT or SIGTERM drain in-flight requests and stop.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := serve.LoadConfig(path)
			if err != nil {
				return err
			}
			if listen != "" {
				cfg.Server.Listen = listen
			}
			log := serve.NewLogger(cfg.Server.LogLevel)
			// The process's own, so here rather than in serve.Main,
			// which tests start many of in one process.
			defer gcfloor.Start(cfg.Server.HeapFloor, log)()
			stopProfiles := sigprof.Start(cpuProfile, traceFile)
			m := &serve.Main{ConfigPath: path, Config: cfg, Logger: log}
			err = m.Run(cmd.Context())
			if perr := stopProfiles(); perr != nil {
				log.Error("could not write a profile", "error", perr)
			}
			return err
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "weir.yaml", "config file")
	cmd.Flags().StringVar(&listen, "listen", "", "address to listen on, over server.listen and WEIR_SERVER_LISTEN (port 0 picks a free one)")
	profileFlags(cmd, &cpuProfile, &traceFile)
	return cmd
}

// profileFlags adds the hidden flags of a profile taken between SIGUSR1
// and SIGUSR2 (sigprof), which weir-bench --out-of-process sends over
// its measured phase.
func profileFlags(cmd *cobra.Command, cpuProfile, traceFile *string) {
	cmd.Flags().StringVar(cpuProfile, "cpuprofile", "", "write a CPU profile taken from SIGUSR1 to SIGUSR2 to this file")
	cmd.Flags().StringVar(traceFile, "trace", "", "write an execution trace taken from SIGUSR1 to SIGUSR2 to this file")
	_ = cmd.Flags().MarkHidden("cpuprofile")
	_ = cmd.Flags().MarkHidden("trace")
}
