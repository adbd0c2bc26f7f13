package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/weir-gateway/weir/serve"
)

func init() { rootCmd.AddCommand(applyCmd()) }

// applyCmd publishes a config file's catalog to the fleet on the
// PostgreSQL the file names: every replica takes it within a second
// (docs/fleet.md). On SQLite the one serve's file is its catalog, and
// SIGHUP reloads it.
func applyCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "apply",
		Short: "Publish the config file's catalog to the fleet (PostgreSQL): every replica serves it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := serve.LoadConfig(path)
			if err != nil {
				return err
			}
			if cfg.Storage.Driver != "postgres" {
				return errors.New("weir apply publishes to a fleet on PostgreSQL; on SQLite one weir serve serves its file's catalog: send it SIGHUP to reload the file")
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			db, err := serve.OpenStorage(cmd.Context(), cfg.Storage, serve.StorageOptions{})
			if err != nil {
				return err
			}
			defer db.Close()
			v, published, err := serve.PublishCatalog(cmd.Context(), &serve.CatalogPublication{
				Store: db.Fleet, Base: cfg, File: data, By: "weir apply"})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if !published {
				fmt.Fprintf(w, "the fleet's catalog version %d (published by %s at %s) is this file's already: nothing published\n",
					v.Version, v.PublishedBy, v.PublishedAt.Format("2006-01-02T15:04:05Z07:00"))
				return nil
			}
			fmt.Fprintf(w, "published catalog version %d (%.12s); every replica serves it within a second, and the run-time limits set in the console are gone\n",
				v.Version, v.Hash)
			return nil
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "weir.yaml", "config file (for the storage and the catalog)")
	return cmd
}
