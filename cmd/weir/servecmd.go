package main

import (
	"github.com/spf13/cobra"

	"github.com/weir-gateway/weir/gcfloor"
	"github.com/weir-gateway/weir/serve"
)

// `weir serve` runs the gateway that package serve assembles.
func init() { rootCmd.AddCommand(serveCmd()) }

func serveCmd() *cobra.Command {
	var path, listen string
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
			m := &serve.Main{ConfigPath: path, Config: cfg, Logger: log}
			return m.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "weir.yaml", "config file")
	cmd.Flags().StringVar(&listen, "listen", "", "address to listen on, over server.listen and WEIR_SERVER_LISTEN (port 0 picks a free one)")
	return cmd
}
