package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-gateway/weir"
)

func init() { rootCmd.AddCommand(tasksCmd()) }

// taskView is the task API's object, as the CLI reads it.
type taskView struct {
	ID         string          `json:"id"`
	Model      string          `json:"model"`
	Status     string          `json:"status"`
	Progress   int             `json:"progress"`
	CreatedAt  int64           `json:"created_at"`
	FinishedAt *int64          `json:"finished_at"`
	Result     json.RawMessage `json:"result"`
	Error      *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Queue *struct {
		Position      int     `json:"position"`
		EstimatedWait float64 `json:"estimated_wait_seconds"`
	} `json:"queue"`
}

// tasksCmd works with a running server's task API, as the key's owner.
// tasksFlags are the flags every tasks subcommand shares: whose tasks,
// on which server.
type tasksFlags struct{ addr, key string }

func (f *tasksFlags) api() *taskClient {
	return &taskClient{base: strings.TrimRight(f.addr, "/"), key: f.key, http: &http.Client{Timeout: 30 * time.Second}}
}

func tasksCmd() *cobra.Command {
	f := &tasksFlags{}
	cmd := &cobra.Command{
		Use:   "tasks",
		Short: "List, show, wait for, fetch, cancel and delete durable tasks on a running server",
		// Every subcommand speaks for a key.
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("key") && f.key == "" {
				return errors.New("--key was given an empty value (is the variable it names set?); " + errNoKey().Error())
			}
			if f.key == "" {
				f.key = envOr("WEIR_API_KEY", "")
			}
			if f.key == "" {
				return errNoKey()
			}
			return nil
		},
	}
	cmd.PersistentFlags().StringVar(&f.addr, "addr", "http://127.0.0.1:8080", "the server's base URL")
	cmd.PersistentFlags().StringVar(&f.key, "key", "", "API key (env WEIR_API_KEY)")
	cmd.AddCommand(tasksListCmd(f), tasksShowCmd(f), tasksWaitCmd(f), tasksContentCmd(f), tasksCancelCmd(f), tasksDeleteCmd(f))
	return cmd
}

// tasksListCmd is `weir tasks list`.
func tasksListCmd(f *tasksFlags) *cobra.Command {
	var status, after string
	var limit int
	list := &cobra.Command{
		Use: "list", Short: "List the key's tasks (deleted ones are not listed), oldest first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var page struct {
				Data    []taskView `json:"data"`
				HasMore bool       `json:"has_more"`
				After   string     `json:"after"`
			}
			q := fmt.Sprintf("/v1/tasks?limit=%d", limit)
			if status != "" {
				q += "&status=" + url.QueryEscape(status)
			}
			if after != "" {
				q += "&after=" + url.QueryEscape(after)
			}
			if err := f.api().do(cmd.Context(), http.MethodGet, q, &page); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tMODEL\tSTATUS\tPROGRESS\tQUEUE\tCREATED")
			for _, t := range page.Data {
				queue := "-"
				if t.Queue != nil {
					queue = fmt.Sprintf("#%d ~%.0fs", t.Queue.Position, t.Queue.EstimatedWait)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d%%\t%s\t%s\n", t.ID, t.Model, t.Status, t.Progress, queue,
					time.Unix(t.CreatedAt, 0).Format(time.RFC3339))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if page.HasMore {
				fmt.Fprintf(cmd.ErrOrStderr(), "more: weir tasks list --after %s\n", page.After)
			}
			return nil
		},
	}
	list.Flags().StringVar(&status, "status", "", "only tasks in this status")
	list.Flags().IntVar(&limit, "limit", 100, "at most this many (1 to 1000)")
	list.Flags().StringVar(&after, "after", "", "the cursor a previous listing printed, to list the page after it")
	return list
}

// tasksShowCmd is `weir tasks show ID`.
func tasksShowCmd(f *tasksFlags) *cobra.Command {
	show := &cobra.Command{
		Use: "show ID", Short: "Show a task as JSON", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var raw json.RawMessage
			if err := f.api().do(cmd.Context(), http.MethodGet, "/v1/tasks/"+args[0], &raw); err != nil {
				return err
			}
			var out bytes.Buffer
			_ = json.Indent(&out, raw, "", "  ")
			fmt.Fprintln(cmd.OutOrStdout(), out.String())
			return nil
		},
	}
	return show
}

// tasksWaitCmd is `weir tasks wait ID`.
func tasksWaitCmd(f *tasksFlags) *cobra.Command {
	var every time.Duration
	wait := &cobra.Command{
		Use: "wait ID", Short: "Wait for a task to end, drawing its progress", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, out := f.api(), cmd.OutOrStdout()
			tick := time.NewTicker(every)
			defer tick.Stop()
			// Off a terminal, a line each time the task has moved on.
			progress := progressLine{w: out, inPlace: isTerminal(out)}
			for {
				var t taskView
				if err := c.do(cmd.Context(), http.MethodGet, "/v1/tasks/"+args[0], &t); err != nil {
					return err
				}
				line := fmt.Sprintf("%-9s %s %3d%%", t.Status, progressBar(t.Progress, 30), t.Progress)
				if t.Queue != nil {
					line += fmt.Sprintf("  queued #%d, about %.0fs", t.Queue.Position, t.Queue.EstimatedWait)
				}
				if weir.TaskStatus(t.Status).Terminal() {
					progress.done(line)
					if t.Error != nil {
						return fmt.Errorf("task %s %s: %s: %s", t.ID, t.Status, t.Error.Code, t.Error.Message)
					}
					if t.Status == string(weir.TaskSucceeded) {
						// The follow-ups speak for the key given with
						// --key; one from the environment is there for
						// them already.
						given := ""
						if cmd.Flags().Changed("key") {
							given = f.key
						}
						printFetchHint(out, c.base, t.ID, given)
					}
					return nil
				}
				progress.show(time.Now(), line)
				select {
				case <-cmd.Context().Done():
					return cmd.Context().Err()
				case <-tick.C:
				}
			}
		},
	}
	wait.Flags().DurationVar(&every, "every", time.Second, "how often to look")
	return wait
}

// tasksContentCmd is `weir tasks content ID`.
func tasksContentCmd(f *tasksFlags) *cobra.Command {
	var output, variant string
	content := &cobra.Command{
		Use: "content ID", Short: "Save what a finished task made (a video's MP4, thumbnail or spritesheet)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := output
			if name == "" {
				name = args[0] + contentExt[variant]
			}
			n, err := f.api().save(cmd.Context(), "/v1/videos/"+url.PathEscape(args[0])+"/content?variant="+url.QueryEscape(variant), name, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			if name != "-" {
				fmt.Fprintf(cmd.ErrOrStderr(), "saved %s (%d bytes)\n", name, n)
			}
			return nil
		},
	}
	content.Flags().StringVarP(&output, "output", "o", "", `file to write ("-": standard output; default ID.mp4, .webp or .jpg by variant)`)
	content.Flags().StringVar(&variant, "variant", "video", "video, thumbnail or spritesheet")
	return content
}

// tasksCancelCmd is `weir tasks cancel ID`.
func tasksCancelCmd(f *tasksFlags) *cobra.Command {
	cancel := &cobra.Command{
		Use: "cancel ID", Short: "Cancel a task", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var t taskView
			if err := f.api().do(cmd.Context(), http.MethodPost, "/v1/tasks/"+args[0]+"/cancel", &t); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", t.ID, t.Status)
			return nil
		},
	}
	return cancel
}

// tasksDeleteCmd is `weir tasks delete ID`.
func tasksDeleteCmd(f *tasksFlags) *cobra.Command {
	del := &cobra.Command{
		Use: "delete ID", Short: "Delete a task: cancel it if it has not ended, delete its upstream job; it is gone afterwards", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var d struct {
				ID      string `json:"id"`
				Deleted bool   `json:"deleted"`
			}
			if err := f.api().do(cmd.Context(), http.MethodDelete, "/v1/tasks/"+url.PathEscape(args[0]), &d); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s deleted\n", d.ID)
			return nil
		},
	}
	return del
}

// errNoKey is what a tasks command says without a key.
func errNoKey() error {
	return fmt.Errorf("no API key: give it with --key or the environment variable WEIR_API_KEY "+
		"(create one with: %s keys create -c weir.yaml --name me; the demo prints one)", selfCommand())
}

// contentExt is the file name ending of each content variant.
var contentExt = map[string]string{"video": ".mp4", "thumbnail": ".webp", "spritesheet": ".jpg"}

// printFetchHint says how to fetch what task id made, with weir and with
// curl, as the key's owner: with key when the command was given it with
// --key (so they work as they are copied), else with the key that
// WEIR_API_KEY holds.
func printFetchHint(w io.Writer, base, id, key string) {
	weirKey, bearer := "", "$WEIR_API_KEY"
	if key != "" {
		weirKey, bearer = " --key "+key, key
	}
	fmt.Fprintf(w, `Fetch the video:
  %[3]s tasks --addr %[1]s%[4]s content %[2]s      # saves %[2]s.mp4
  curl -o %[2]s.mp4 %[1]s/v1/videos/%[2]s/content -H "Authorization: Bearer %[5]s"
The upstream's own object (the task's result): %[3]s tasks --addr %[1]s%[4]s show %[2]s
`, base, id, selfCommand(), weirKey, bearer)
}

func progressBar(pct, width int) string {
	n := max(0, min(width, pct*width/100))
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

type taskClient struct {
	base, key string
	http      *http.Client
}

// send makes a request with the key and turns an error answer into an
// error, with a hint where the fix is the caller's.
func (c *taskClient) send(ctx context.Context, method, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, unreachable(c.base, err)
	}
	if resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error.Code == "" {
		return nil, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	err = fmt.Errorf("%s: %s", e.Error.Code, e.Error.Message)
	if resp.StatusCode == http.StatusUnauthorized {
		err = fmt.Errorf("%w (the server at %s refused the key: check --key or WEIR_API_KEY; create one with: %s keys create -c weir.yaml --name me)",
			err, c.base, selfCommand())
	}
	return nil, err
}

func (c *taskClient) do(ctx context.Context, method, path string, out any) error {
	resp, err := c.send(ctx, method, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	return json.Unmarshal(body, out)
}

// save writes the answer's body to the file name ("-": w), created only
// once the server has answered with content.
func (c *taskClient) save(ctx context.Context, path, name string, w io.Writer) (int64, error) {
	resp, err := c.send(ctx, http.MethodGet, path)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if name == "-" {
		return io.Copy(w, resp.Body)
	}
	f, err := os.Create(name)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// unreachable says that nothing answered at base, and what to check.
func unreachable(base string, err error) error {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("nothing answers at %s: is weir serve (or weir demo) running there? Give its address with --addr: %w", base, err)
	}
	return err
}
