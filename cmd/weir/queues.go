package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/console"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/httpapi"
)

func init() { rootCmd.AddCommand(queuesCmd()) }

// queuesCmd shows what a running server is holding and queueing, scope by
// scope, from its admin API; with --scope, one scope's waiters in order, a
// page at a time.
func queuesCmd() *cobra.Command {
	var addr, token, scope string
	var all, watch bool
	var interval time.Duration
	var offset, limit int
	cmd := &cobra.Command{
		Use:   "queues",
		Short: "Show what is waiting and held right now on a running server",
		Long: `Show what is waiting and held right now on a running server: each scope's
limit, use and queue. A request counts under every scope it needs or may be
admitted by (its key's, its group's and each of its candidates'), so the
per-scope figures add up to more than there are requests; the line under
the table counts each request once. With --scope, that scope's waiters in
the order they will be admitted, --limit at a time from --offset.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			paged := cmd.Flags().Changed("offset") || cmd.Flags().Changed("limit")
			switch {
			case scope != "" && watch:
				return errors.New("--scope lists one scope's waiters once; --watch redraws every scope: give one of them")
			case scope == "" && paged:
				return errors.New("--offset and --limit page one scope's waiters: name it with --scope")
			case offset < 0:
				return errors.New("--offset must not be negative")
			case limit < 1 || limit > 500:
				return errors.New("--limit is 1 to 500")
			}
			if watch {
				return watchQueues(cmd.Context(), cmd.OutOrStdout(), addr, token, all, interval, isTerminal(cmd.OutOrStdout()))
			}
			if scope != "" {
				q, err := fetchScopeQueue(addr, token, scope, offset, limit)
				if err != nil {
					return err
				}
				printScopeQueue(cmd.OutOrStdout(), q)
				return nil
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
	cmd.Flags().StringVar(&scope, "scope", "", "list this scope's waiters in the order they will be admitted (e.g. pm:up/chat)")
	cmd.Flags().IntVar(&offset, "offset", 0, "with --scope, skip this many waiters")
	cmd.Flags().IntVar(&limit, "limit", 50, "with --scope, list at most this many waiters (1 to 500)")
	return cmd
}

func fetchQueues(addr, token string) (httpapi.QueueView, error) {
	var view httpapi.QueueView
	return view, adminGet(addr, token, "/admin/queues", &view)
}

// adminGet decodes the JSON answer of a running server's admin API at
// path into v.
func adminGet(addr, token, path string, v any) error {
	return adminCall(http.MethodGet, addr, token, path, v)
}

// adminCall makes a bodiless request of a running server's admin API at
// path and decodes its JSON answer into v.
func adminCall(method, addr, token, path string, v any) error {
	if token == "" {
		token = envOr("WEIR_ADMIN_TOKEN", "")
	}
	req, err := http.NewRequest(method, strings.TrimRight(addr, "/")+path, nil)
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
	printRequests(w, view.Requests)
	printShadow(w, view, all)
}

// printRequests counts the requests once each, and says why the scopes'
// figures add up to more.
func printRequests(w io.Writer, n *gateway.Requests) {
	fmt.Fprintln(w)
	if n != nil {
		fmt.Fprintf(w, "%d waiting and %d in flight in all, each request counted once. ", n.Waiting, n.InFlight)
	}
	fmt.Fprintln(w, "A request counts under every scope it needs or may be\n"+
		"admitted by (its key's, its group's, each candidate's), so the scopes add up to more;\n"+
		"one scope's waiters in order: weir queues --scope NAME")
}

// fetchScopeQueue asks for one page of scope's waiters, from the
// console's API (the same access as the admin API's).
func fetchScopeQueue(addr, token, scope string, offset, limit int) (console.QueueAnswer, error) {
	var q console.QueueAnswer
	path := fmt.Sprintf("/console/api/queue?scope=%s&offset=%d&limit=%d", url.QueryEscape(scope), offset, limit)
	return q, adminGet(addr, token, path, &q)
}

// printScopeQueue lists a page of one scope's waiters, each once, in the
// order they will be admitted there, and the leases it holds.
func printScopeQueue(w io.Writer, q console.QueueAnswer) {
	state := ""
	if st := q.Stats; st != nil {
		limit := "no limit"
		if st.Limit > 0 {
			limit = fmt.Sprintf("limit %d", st.Limit)
		}
		state = fmt.Sprintf("%s, %d in flight, ", limit, st.InFlight)
	}
	fmt.Fprintf(w, "%s: %s%d waiting\n", q.Scope, state, q.Queued)
	if len(q.Waiters) == 0 {
		if q.Offset > 0 && q.Queued > 0 {
			fmt.Fprintf(w, "no waiter past position %d\n", q.Offset)
		} else {
			fmt.Fprintln(w, "nobody waits")
		}
	} else {
		last := q.Waiters[len(q.Waiters)-1].Position
		fmt.Fprintf(w, "waiters %d–%d of %d, in the order they will be admitted here (a waiter may also wait on its other candidates' scopes):\n",
			q.Waiters[0].Position, last, q.Queued)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "POS\tWAITER\tKEY\tPRIORITY\tAMOUNT\tWAITED\tGIVES UP IN")
		for _, r := range q.Waiters {
			key := dash(r.Tenant)
			if r.TenantName != "" {
				key = r.TenantName + " (" + r.Tenant + ")"
			}
			id := r.ID
			if r.Task {
				id += " (task)"
			}
			if r.Holder {
				id += " (held for)"
			}
			deadline := "no deadline"
			if r.DeadlineMs != nil {
				deadline = msAgo(*r.DeadlineMs)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%s\t%s\n", r.Position, id, key, r.Priority, r.Amount, msAgo(r.AgeMs), deadline)
		}
		tw.Flush()
		if next := q.Offset + len(q.Waiters); next < q.Queued {
			fmt.Fprintf(w, "more: weir queues --scope %s --offset %d --limit %d\n", q.Scope, next, q.Limit)
		}
	}
	fmt.Fprintf(w, "\nheld: %d leases\n", q.Held)
	if len(q.Leases) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LEASE\tWAITER\tOWNER\tAMOUNT\tHELD FOR\tEXPIRES IN")
	for _, l := range q.Leases {
		held, expires := "not timed", "never"
		if l.AgeMs != nil {
			held = msAgo(*l.AgeMs)
		}
		if l.ExpiresMs != nil {
			expires = msAgo(*l.ExpiresMs)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", l.ID, l.WaiterID, dash(l.Owner), l.Amount, held, expires)
	}
	tw.Flush()
	if len(q.Leases) < q.Held {
		fmt.Fprintf(w, "and %d more leases\n", q.Held-len(q.Leases))
	}
}

// msAgo is ms milliseconds as a duration, to the millisecond.
func msAgo(ms int64) string {
	return (time.Duration(ms) * time.Millisecond).Round(time.Millisecond).String()
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
	if p := f.Protocol; p != nil {
		speaks := fmt.Sprintf("%d..%d", p.Min, p.Max)
		if p.Min == p.Max {
			speaks = fmt.Sprint(p.Min)
		}
		if p.Refused != "" {
			fmt.Fprintf(w, "fleet protocol: REFUSED: %s\n", p.Refused)
		} else if p.Version > 0 {
			fmt.Fprintf(w, "fleet protocol: %d (its build speaks %s)\n", p.Version, speaks)
		}
	}
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
