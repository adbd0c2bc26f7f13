package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/serve"
)

func init() { rootCmd.AddCommand(keysCmd()) }

// keysCmd manages API keys in the database named by the config file. The
// store is shared with a running server (SQLite in WAL mode allows it, and
// PostgreSQL is shared anyway); a new key works at once, a revocation
// within the server's key cache TTL.
func keysCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{Use: "keys", Short: "Create, list and revoke API keys"}
	cmd.PersistentFlags().StringVarP(&path, "config", "c", "weir.yaml", "config file (for the storage path and default group)")

	create := keysCreateCmd(&path)

	list := &cobra.Command{
		Use:   "list",
		Short: "List keys",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, db, err := openStore(cmd.Context(), path)
			if err != nil {
				return err
			}
			defer db.Close()
			ks, err := db.KeyList(cmd.Context())
			if err != nil {
				return err
			}
			printKeys(cmd.OutOrStdout(), ks)
			return nil
		},
	}

	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a key",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, db, err := openStore(cmd.Context(), path)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := db.KeyRevoke(cmd.Context(), &weir.KeyRevokeParams{ID: args[0], At: time.Now()}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked %s\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

// keysCreateCmd is `weir keys create`, on the config at *path.
func keysCreateCmd(path *string) *cobra.Command {
	var k weir.APIKey
	var models, budget, budgetZone string
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a key; its secret is shown once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, db, err := openStore(cmd.Context(), *path)
			if err != nil {
				return err
			}
			defer db.Close()
			// In a fleet, the group is checked against the catalog it
			// serves, which need not be this file's.
			if cfg, err = serve.FleetConfig(cmd.Context(), db, cfg); err != nil {
				return err
			}
			if k.Group == "" {
				k.Group = cfg.DefaultGroup
			}
			cat, err := cfg.Catalog()
			if err != nil {
				return err
			}
			if err := cat.CheckKeyGroup(k.Group); err != nil {
				return err
			}
			if models != "" {
				k.Models = strings.Split(models, ",")
			}
			// The budget is checked before the key is made, so that a
			// mistake in it makes nothing.
			var b weir.Budget
			if budget != "" {
				if b, err = (budgetFlags{zone: budgetZone}).budget("key:pending", budget, time.Now()); err != nil {
					return fmt.Errorf("--budget: %w", err)
				}
			}
			secret, err := serve.CreateKey(cmd.Context(), db, &k)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "id:     %s\nname:   %s\ngroup:  %s\nsecret: %s\n", k.ID, k.Name, k.Group, secret)
			if budget != "" {
				b.Subject.Name = k.ID
				if err := db.BudgetCreate(cmd.Context(), b); err != nil {
					fmt.Fprintf(out, "\nThe secret is shown only now; store it safely.\n")
					return fmt.Errorf("the key is made, its budget not (weir budgets create %s %s): %w", b.Subject, budget, err)
				}
				fmt.Fprintf(out, "budget: %s per %s, hard (%s)\n", b.Amount, b.Window, b.ID)
			}
			fmt.Fprintf(out, "\nThe secret is shown only now; store it safely.\n")
			return nil
		},
	}
	create.Flags().StringVar(&k.Name, "name", "", "a name to recognise the key by")
	create.Flags().StringVar(&k.Group, "group", "", "group: one of the config's groups (default: the config's default_group)")
	create.Flags().StringVar(&models, "models", "", "comma-separated allow-list of public models (default: all)")
	create.Flags().Int64Var(&k.Concurrency, "concurrency", 0, "requests in flight at once (0: no limit)")
	create.Flags().Int64Var(&k.RPM, "rpm", 0, "requests per minute (0: no limit)")
	create.Flags().Int64Var(&k.TPM, "tpm", 0, "tokens per minute (0: no limit)")
	create.Flags().IntVar(&k.QueueLimit, "queue-limit", 0, "requests that may wait (0: no limit)")
	create.Flags().StringVar(&budget, "budget", "", "a hard budget for the key, AMOUNT/WINDOW: 50/month, 12.50/day, 100/30d")
	create.Flags().StringVar(&budgetZone, "budget-zone", "", "the IANA time zone of the budget's calendar window (default UTC)")
	create.Flags().BoolVar(&k.Shadow, "shadow", false, "judge the key's limits on every request but enforce none: count and log what they would do")
	return create
}

// openStore loads the config at path and opens the storage it names.
func openStore(ctx context.Context, path string) (*config.Config, *serve.Storage, error) {
	cfg, err := serve.LoadConfig(path)
	if err != nil {
		return nil, nil, err
	}
	db, err := serve.OpenStorage(ctx, cfg.Storage, serve.StorageOptions{})
	if err != nil {
		return nil, nil, err
	}
	return cfg, db, nil
}

func printKeys(w io.Writer, ks []weir.APIKey) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tPREFIX\tGROUP\tMODELS\tCONCURRENCY\tRPM\tTPM\tCREATED\tSTATUS")
	for _, k := range ks {
		status := "active"
		if !k.Active() {
			status = "revoked " + k.RevokedAt.Format(time.RFC3339)
		}
		if k.Shadow {
			status += ", limits in shadow"
		}
		models := "*"
		if len(k.Models) > 0 {
			models = strings.Join(k.Models, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s…\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", k.ID, k.Name, k.Prefix, k.Group, models,
			k.Concurrency, k.RPM, k.TPM, k.CreatedAt.Format(time.RFC3339), status)
	}
	tw.Flush()
}
