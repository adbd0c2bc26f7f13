package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/weir-gateway/weir/console"
	"github.com/weir-gateway/weir/httpapi"
)

// watchQueues draws the queues on w from the console's live stream (the
// same snapshots the web console gets), at most once per interval, until
// Ctrl-C. A server without the stream is asked /admin/queues every
// interval instead. On a terminal (tty) each drawing replaces the last;
// elsewhere (a pipe, a file) each is written after the last, as plain
// lines under a time stamp, with no escape codes.
func watchQueues(ctx context.Context, w io.Writer, addr, token string, all bool, interval time.Duration, tty bool) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if token == "" {
		token = envOr("WEIR_ADMIN_TOKEN", "")
	}
	if tty {
		defer fmt.Fprint(w, "\x1b[?25h") // the cursor, shown again
		fmt.Fprint(w, "\x1b[?25l")
	}
	var last time.Time
	draw := func(snap *console.Snapshot, view httpapi.QueueView, note string) {
		if time.Since(last) < interval {
			return
		}
		last = time.Now()
		var b strings.Builder
		if tty {
			b.WriteString("\x1b[H\x1b[2J") // home, clear
			fmt.Fprintf(&b, "weir queues --watch  %s  %s  (Ctrl-C to stop)\n\n", addr, time.Now().Format("15:04:05"))
		} else {
			fmt.Fprintf(&b, "--- weir queues --watch  %s  %s\n\n", addr, time.Now().Format(time.RFC3339))
		}
		if snap != nil {
			printModels(&b, snap)
		}
		printQueues(&b, view, all)
		if note != "" {
			fmt.Fprintf(&b, "\n%s\n", note)
		}
		if !tty {
			b.WriteString("\n")
		}
		_, _ = io.WriteString(w, b.String())
	}
	for {
		err := streamQueues(ctx, addr, token, func(s *console.Snapshot) {
			view := httpapi.QueueView{Scopes: s.Scopes, Requests: &s.Requests}
			if s.Fleet != nil {
				if raw, err := json.Marshal(s.Fleet); err == nil {
					view.Fleet = new(httpapi.FleetView)
					_ = json.Unmarshal(raw, view.Fleet)
				}
			}
			draw(s, view, "")
		})
		if ctx.Err() != nil {
			return nil
		}
		var noStream errNoStream
		if !errors.As(err, &noStream) {
			last = time.Time{}
			draw(nil, httpapi.QueueView{}, fmt.Sprintf("the live stream broke (%v); reconnecting…", err))
			if !sleepCtx(ctx, interval) {
				return nil
			}
			continue
		}
		// No stream (an older server): poll.
		view, err := fetchQueues(addr, token)
		if err != nil {
			return err
		}
		last = time.Time{}
		draw(nil, view, "(polled: the server has no live stream)")
		if !sleepCtx(ctx, interval) {
			return nil
		}
	}
}

type errNoStream struct{ status string }

func (e errNoStream) Error() string { return "no live stream: " + e.status }

// streamQueues reads the console's event stream and calls f with each
// snapshot, until the stream or ctx ends.
func streamQueues(ctx context.Context, addr, token string, f func(*console.Snapshot)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(addr, "/")+"/console/api/events", nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return unreachable(addr, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return errNoStream{resp.Status}
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("ask %s: %s (the console answers loopback connections, or the server's admin_token: give it with --token or WEIR_ADMIN_TOKEN)", addr, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("ask %s: %s", addr, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = line[7:]
		case strings.HasPrefix(line, "data: ") && event == "snapshot":
			var s console.Snapshot
			if err := json.Unmarshal([]byte(line[6:]), &s); err == nil {
				f(&s)
			}
		case line == "":
			event = ""
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}

// printModels is the overview's table: per model, now and over the
// console's window; then the scopes several models share, each once.
func printModels(w io.Writer, s *console.Snapshot) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tIN FLIGHT\tLIMIT\tQUEUED\tADMITTED/S\tWAIT P50\tWAIT P99\tQUEUED, THEN SERVED")
	for _, m := range s.Models {
		limit := "-"
		if m.Limit > 0 {
			limit = fmt.Sprint(m.Limit)
		}
		name := m.Name
		if m.Paused {
			name += " (paused)"
		}
		inFlight, queued := fmt.Sprint(m.InFlight), fmt.Sprint(m.Queued)
		if m.Scopes != nil && len(m.Scopes) == 0 {
			inFlight, limit, queued = "-", "-", "-" // all its capacity is shared: below
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.0f\t%s\t%s\t%d\n", name, inFlight, limit, queued, m.AdmittedPerSec,
			msText(m.P50), msText(m.P99), m.QueuedAdmitted)
	}
	tw.Flush()
	if len(s.Shared) > 0 {
		fmt.Fprintln(w, "\nshared by several models (counted here once, not under each):")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SCOPE\tSERVES\tIN FLIGHT\tLIMIT\tQUEUED")
		for _, r := range s.Shared {
			limit := "-"
			if r.Limit > 0 {
				limit = fmt.Sprint(r.Limit)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\n", r.Scope, strings.Join(r.Models, ", "), r.InFlight, limit, r.Queued)
		}
		tw.Flush()
	}
	if len(s.Failed) > 0 {
		var parts []string
		for o, n := range s.Failed {
			parts = append(parts, fmt.Sprintf("%s %d", o, n))
		}
		fmt.Fprintf(w, "left without a lease since start: %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w, "(wait quantiles and queued-then-served over the last 15 minutes)")
	fmt.Fprintln(w)
}

func msText(ms float64) string {
	return (time.Duration(ms * float64(time.Millisecond))).Round(time.Millisecond).String()
}

// sleepCtx waits d or until ctx ends; false if ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
