package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/keys"
	"github.com/weir-gateway/weir/serve"
)

func init() { rootCmd.AddCommand(budgetsCmd()) }

// budgetsCmd manages the budgets kept in the database the config file
// names, as keysCmd does keys: every replica reads them, so a budget
// made, raised or deleted here holds at once, without a restart. The
// config file's own budgets are listed by none of these: the file says
// them.
func budgetsCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{Use: "budgets", Short: "Create, list, change and delete spend budgets"}
	cmd.PersistentFlags().StringVarP(&path, "config", "c", "weir.yaml", "config file (for the storage and the catalog)")
	cmd.AddCommand(budgetsListCmd(&path), budgetsCreateCmd(&path), budgetsSetCmd(&path), budgetsDeleteCmd(&path))
	return cmd
}

func budgetsListCmd(path *string) *cobra.Command {
	return &cobra.Command{
		Use:   "list [SUBJECT]",
		Short: "List budgets, all or one subject's (key:ID, group:NAME, model:NAME, platform_model:NAME, user:END_USER, user:*)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var f weir.BudgetFilter
			if len(args) == 1 {
				var err error
				if f.Subject, err = weir.ParseBudgetSubject(args[0]); err != nil {
					return err
				}
			}
			_, db, err := openStore(cmd.Context(), *path)
			if err != nil {
				return err
			}
			defer db.Close()
			bs, err := db.BudgetList(cmd.Context(), f)
			if err != nil {
				return err
			}
			printBudgets(cmd.OutOrStdout(), bs, time.Now())
			return nil
		},
	}
}

// budgetFlags are the flags of a budget's mode and alerts.
type budgetFlags struct {
	zone, anchor, mode, alerts string
}

func budgetsCreateCmd(path *string) *cobra.Command {
	var fl budgetFlags
	create := &cobra.Command{
		Use:   "create SUBJECT AMOUNT/WINDOW",
		Short: "Create a budget: weir budgets create key:ID 50/month --zone Europe/Berlin --mode soft --alerts 80,100",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := fl.budget(args[0], args[1], time.Now())
			if err != nil {
				return err
			}
			cfg, db, err := openStore(cmd.Context(), *path)
			if err != nil {
				return err
			}
			defer db.Close()
			if cfg, err = serve.FleetConfig(cmd.Context(), db, cfg); err != nil {
				return err
			}
			if err := checkSubject(cmd.Context(), cfg, db, b.Subject); err != nil {
				return err
			}
			if err := db.BudgetCreate(cmd.Context(), b); err != nil {
				return fmt.Errorf("create %s's budget over a %s window: %w", b.Subject, b.Window, err)
			}
			printBudgets(cmd.OutOrStdout(), []weir.Budget{b}, time.Now())
			return nil
		},
	}
	f := create.Flags()
	f.StringVar(&fl.zone, "zone", "", "a calendar window's IANA time zone (default UTC)")
	f.StringVar(&fl.anchor, "anchor", "", "where a rolling window's periods start, RFC 3339 (default now)")
	f.StringVar(&fl.mode, "mode", "hard", "hard (refuse), soft (alert only) or shadow (count what it would refuse)")
	f.StringVar(&fl.alerts, "alerts", "", "thresholds in percent of the amount, ascending, comma-separated (80,100)")
	return create
}

// budget is the budget of subject and spec (AMOUNT/WINDOW) with fl,
// made at now, with a new ID, valid.
func (fl budgetFlags) budget(subject, spec string, now time.Time) (weir.Budget, error) {
	sub, err := weir.ParseBudgetSubject(subject)
	if err != nil {
		return weir.Budget{}, err
	}
	amount, win, err := weir.ParseBudgetSpec(spec)
	if err != nil {
		return weir.Budget{}, err
	}
	win.Zone = fl.zone
	if fl.anchor != "" {
		if win.Anchor, err = time.Parse(time.RFC3339, fl.anchor); err != nil {
			return weir.Budget{}, fmt.Errorf("%w: --anchor %q: want an RFC 3339 time", weir.ErrInvalid, fl.anchor)
		}
	}
	alerts, err := parseAlerts(fl.alerts)
	if err != nil {
		return weir.Budget{}, err
	}
	id, err := keys.NewID(weir.BudgetIDPrefix)
	if err != nil {
		return weir.Budget{}, err
	}
	b := weir.Budget{ID: id, Subject: sub, Amount: amount, Window: win, Mode: weir.BudgetMode(fl.mode), Alerts: alerts,
		CreatedAt: now, UpdatedAt: now}.WithDefaults()
	return b, b.Validate()
}

// checkSubject refuses a budget for what does not exist: a key not in
// the store, a group, model or platform model not in the catalog. Such
// a budget would never apply, and nobody would be told.
func checkSubject(ctx context.Context, cfg *config.Config, db weir.Store, s weir.BudgetSubject) error {
	if s.Type == "key" {
		if _, err := db.KeyByID(ctx, s.Name); err != nil {
			return fmt.Errorf("budget of %s: %w", s, err)
		}
		return nil
	}
	cat, err := cfg.Catalog()
	if err != nil {
		return err
	}
	return cat.CheckBudgetSubject(s)
}

// parseAlerts reads "80,100"; "" and "none" are none.
func parseAlerts(s string) ([]int, error) {
	if s == "" || s == "none" {
		return nil, nil
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("%w: alerts %q: want percentages such as 80,100", weir.ErrInvalid, s)
		}
		out = append(out, n)
	}
	return out, nil
}

func budgetsSetCmd(path *string) *cobra.Command {
	var amount, mode, alerts string
	set := &cobra.Command{
		Use:   "set ID",
		Short: "Raise or lower a budget, or change its mode or alerts, at once on every replica",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p := weir.BudgetUpdateParams{ID: args[0], At: time.Now()}
			if cmd.Flags().Changed("amount") {
				m, err := weir.ParseMoney(amount)
				if err != nil {
					return err
				}
				p.Amount = &m
			}
			if cmd.Flags().Changed("mode") {
				m := weir.BudgetMode(mode)
				p.Mode = &m
			}
			if cmd.Flags().Changed("alerts") {
				a, err := parseAlerts(alerts)
				if err != nil {
					return err
				}
				a = append([]int{}, a...) // an empty list ends them
				p.Alerts = &a
			}
			if err := p.Validate(); err != nil {
				return err
			}
			_, db, err := openStore(cmd.Context(), *path)
			if err != nil {
				return err
			}
			defer db.Close()
			b, err := db.BudgetUpdate(cmd.Context(), &p)
			if err != nil {
				return err
			}
			printBudgets(cmd.OutOrStdout(), []weir.Budget{b}, time.Now())
			return nil
		},
	}
	set.Flags().StringVar(&amount, "amount", "", "the new amount (a decimal, such as 75 or 12.50)")
	set.Flags().StringVar(&mode, "mode", "", "hard, soft or shadow")
	set.Flags().StringVar(&alerts, "alerts", "", "thresholds in percent, ascending (80,100); none ends them")
	return set
}

func budgetsDeleteCmd(path *string) *cobra.Command {
	return &cobra.Command{
		Use:   "delete ID",
		Short: "Delete a budget",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, db, err := openStore(cmd.Context(), *path)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := db.BudgetDelete(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted %s\n", args[0])
			return nil
		},
	}
}

// printBudgets writes bs as a table, with when each one's window resets
// after now.
func printBudgets(w io.Writer, bs []weir.Budget, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSUBJECT\tAMOUNT\tWINDOW\tMODE\tALERTS\tRESETS")
	for _, b := range bs {
		window := b.Window.String()
		if b.Window.Zone != "" {
			window += " " + b.Window.Zone
		}
		alerts := "-"
		if len(b.Alerts) > 0 {
			parts := make([]string, len(b.Alerts))
			for i, a := range b.Alerts {
				parts[i] = strconv.Itoa(a) + "%"
			}
			alerts = strings.Join(parts, ",")
		}
		_, until := b.Window.Bounds(now)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.ID, b.Subject, b.Amount, window, b.Mode, alerts, until.Format(time.RFC3339))
	}
	tw.Flush()
}
