package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-gateway/weir/httpapi"
)

func init() { rootCmd.AddCommand(spendCmd()) }

// spendCmd shows what requests cost, from a running server's admin API
// (GET /admin/spend).
func spendCmd() *cobra.Command {
	var addr, token, by, since, window, bucket string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "spend",
		Short: "Show what requests cost, by key, group, model, platform model or end user",
		Long: `Show what requests cost on a running server, summed from its usage records at
its platform models' prices: by key, group, model, platform model or end user
(user: the requests that named one), over the
current UTC day, week or month (--window, month by default) or since a time
(--since 24h, 7d, 2026-03-01 or an RFC 3339 time), whole or by --bucket (hour,
day, week, month). Amounts are in the currency the prices are written in.
ESTIMATED counts the requests whose upstream reported no usage, priced from
their estimate.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			q, err := spendQuery(by, since, window, bucket, time.Now())
			if err != nil {
				return err
			}
			var view httpapi.SpendView
			if err := adminGet(addr, token, "/admin/spend?"+q.Encode(), &view); err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(view)
			}
			printSpend(cmd.OutOrStdout(), view)
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "http://127.0.0.1:8080", "the server's base URL")
	cmd.Flags().StringVar(&token, "token", "", "admin token (when the server sets one; env WEIR_ADMIN_TOKEN)")
	cmd.Flags().StringVar(&by, "by", "key", "sum by key, group, model, platform_model or user (end user)")
	cmd.Flags().StringVar(&since, "since", "", "from this long ago (24h, 7d) or this time (2026-03-01, RFC 3339) until now")
	cmd.Flags().StringVar(&window, "window", "", "the current UTC day, week or month (default month, without --since)")
	cmd.Flags().StringVar(&bucket, "bucket", "", "sum by hour, day, week or month too")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the server's JSON")
	return cmd
}

// spendQuery is /admin/spend's query for the flags, at now; the server
// checks by and bucket.
func spendQuery(by, since, window, bucket string, now time.Time) (url.Values, error) {
	q := url.Values{"by": {by}}
	if bucket != "" {
		q.Set("bucket", bucket)
	}
	switch {
	case since != "" && window != "":
		return nil, errors.New("give --since or --window, not both")
	case window != "":
		q.Set("window", window)
	case since != "":
		from, err := sinceTime(since, now)
		if err != nil {
			return nil, err
		}
		q.Set("from", from.UTC().Format(time.RFC3339))
	}
	return q, nil
}

// sinceTime reads --since: a duration back from now (hours and less as
// Go writes them, or whole days as "7d"), a date, or an RFC 3339 time.
func sinceTime(s string, now time.Time) (time.Time, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n > 0 {
			return now.AddDate(0, 0, -n), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--since %q: want a duration (24h, 7d), a date (2026-03-01) or an RFC 3339 time", s)
}

func printSpend(w io.Writer, view httpapi.SpendView) {
	const layout = "2006-01-02 15:04"
	fmt.Fprintf(w, "spend by %s from %s until %s UTC: %s\n", view.By, view.From.UTC().Format(layout), view.Until.UTC().Format(layout), view.Total)
	if len(view.Rows) == 0 {
		fmt.Fprintln(w, "no requests in the window")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "SUBJECT\t"
	if view.Bucket != "" {
		head += strings.ToUpper(view.Bucket) + "\t"
	}
	fmt.Fprintln(tw, head+"REQUESTS\tTOKENS\tCOST\tESTIMATED")
	for _, r := range view.Rows {
		line := r.Subject + "\t"
		if view.Bucket != "" {
			line += r.Bucket.UTC().Format(layout) + "\t"
		}
		fmt.Fprintf(tw, "%s%d\t%d\t%s\t%d\n", line, r.Requests, r.Tokens, r.Cost, r.Estimated)
	}
	_ = tw.Flush()
}
