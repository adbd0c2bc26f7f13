package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/httpapi"
)

func init() { rootCmd.AddCommand(queuesCmd()) }

// queuesCmd shows what a running server is holding and queueing, scope by
// scope, from its admin API.
func queuesCmd() *cobra.Command {
	var addr, token string
	var all, watch bool
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "queues",
		Short: "Show what is waiting and held right now on a running server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if watch {
				return watchQueues(cmd.Context(), cmd.OutOrStdout(), addr, token, all, interval, isTerminal(cmd.OutOrStdout()))
			}
			view, err := fetchQueues(addr, token)
			if err != nil {
				return err
			}
			printQueues(cmd.OutOrStdout(), view, all)
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "http://127.0.0.1:8080", "the server's base URL")
	cmd.Flags().StringVar(&token, "token", "", "admin token (when the server sets one; env WEIR_ADMIN_TOKEN)")
	cmd.Flags().BoolVar(&all, "all", false, "include per-key scopes")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "redraw live from the server's console stream until Ctrl-C (plain snapshots when not a terminal)")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "with --watch, redraw at most this often")
	return cmd
}

func fetchQueues(addr, token string) (httpapi.QueueView, error) {
	var view httpapi.QueueView
	return view, adminGet(addr, token, "/admin/queues", &view)
}

// adminGet decodes the JSON answer of a running server's admin API at
// path into v.
func adminGet(addr, token, path string, v any) error {
	if token == "" {
		token = envOr("WEIR_ADMIN_TOKEN", "")
	}
	req, err := http.NewRequest(http.MethodGet, strings.TrimRight(addr, "/")+path, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("ask %s: %w", addr, unreachable(addr, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		err := fmt.Errorf("ask %s: %s: %s", addr, resp.Status, strings.TrimSpace(string(body)))
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			err = fmt.Errorf("%w (the admin API answers loopback connections, or the server's admin_token: give it with --token or WEIR_ADMIN_TOKEN)", err)
		}
		return err
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func printQueues(w io.Writer, view httpapi.QueueView, all bool) {
	if f := view.Fleet; f != nil {
		printFleet(w, f)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCOPE\tIN FLIGHT\tLIMIT\tWAITING\tHELD\tMEAN HOLD\tRPM LEFT\tTPM LEFT")
	for _, s := range view.Scopes {
		if !all && strings.HasPrefix(s.Name, weir.KeyScope("")) {
			continue
		}
		limit := "-"
		if s.Limit > 0 {
			limit = fmt.Sprint(s.Limit)
		}
		name := s.Name
		switch {
		case s.Orphaned:
			name += " (orphaned)"
		case s.PausedUntil != "":
			name += " (paused until " + s.PausedUntil + ")"
		case s.Paused:
			name += " (paused)"
		}
		if s.Shadow {
			name += " (shadow)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\t%s\t%s\n", name, s.InFlight, limit, s.Waiting, s.Held, dash(s.MeanHold),
			rate(s.RPM, s.RPMLeft), rate(s.TPM, s.TPMLeft))
	}
	tw.Flush()
	printShadow(w, view, all)
}

// printShadow says what the limits in shadow would have done, for the
// scopes that are or were in shadow.
func printShadow(w io.Writer, view httpapi.QueueView, all bool) {
	var shadow []httpapi.ScopeView
	for _, s := range view.Scopes {
		if s.Would != nil && (all || !strings.HasPrefix(s.Name, weir.KeyScope(""))) {
			shadow = append(shadow, s)
		}
	}
	if len(shadow) == 0 {
		return
	}
	fmt.Fprintln(w, "\nlimits in shadow, what they would have done:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCOPE\tSHADOW\tWOULD WAIT NOW\tWAITS\tREFUSALS\tTIMEOUTS")
	for _, s := range shadow {
		fmt.Fprintf(tw, "%s\t%v\t%d\t%d\t%d\t%d\n", s.Name, s.Shadow, s.Would.Queued, s.Would.Waits, s.Would.Refusals, s.Would.Timeouts)
	}
	tw.Flush()
}

// printFleet says which fleet the queues below are, as the replica that
// answered sees it.
func printFleet(w io.Writer, f *httpapi.FleetView) {
	state := "synced with the leader"
	switch {
	case f.Leading:
		state = "leading"
	case !f.Synced:
		state = "NOT synced: its admissions fail with store_unavailable"
	}
	leader := f.Leader
	if leader == "" {
		leader = "none yet"
	}
	fmt.Fprintf(w, "fleet: epoch %d, leader %s; asked replica %s (%s)\n", f.Epoch, leader, f.Replica, state)
	if f.Error != "" {
		fmt.Fprintf(w, "live replicas: unknown (%s)\n", f.Error)
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "REPLICA\tGEN\tWORKERS\tHEARTBEAT")
		for _, r := range f.Replicas {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s ago\n", r.ID, r.Gen, r.Workers, (time.Duration(r.HeartbeatAgeMs) * time.Millisecond).String())
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func rate(limit int64, left float64) string {
	if limit == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f/%d", left, limit)
}
