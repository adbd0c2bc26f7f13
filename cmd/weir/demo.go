package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/provider/mock"
)

func init() { rootCmd.AddCommand(demoCmd()) }

type demoOptions struct {
	listen  string
	dir     string
	burst   int
	latency time.Duration
	exit    bool
}

func demoCmd() *cobra.Command {
	var o demoOptions
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the mock provider and the gateway, and show a burst queueing",
		Long: `Start the mock provider and the gateway in this process, on embedded
SQLite, with a demo key; print what to curl; then send a burst of requests
at a model whose platform allows 2 at a time, and show them wait in line
instead of failing. The gateway keeps serving until Ctrl-C (or --exit).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDemo(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	cmd.Flags().StringVar(&o.listen, "listen", "127.0.0.1:8080", "gateway address (port 0 picks a free one)")
	cmd.Flags().StringVar(&o.dir, "dir", "", "directory for the demo database (default: a temporary one)")
	cmd.Flags().IntVar(&o.burst, "burst", 8, "requests in the burst (0: none)")
	cmd.Flags().DurationVar(&o.latency, "latency", 1500*time.Millisecond, "mock provider latency per request")
	cmd.Flags().BoolVar(&o.exit, "exit", false, "exit after the burst instead of serving")
	return cmd
}

// demoConfig is the demo's catalog: one chat model on a platform allowing
// 2 requests at a time; embeddings, images and speech besides; and a video
// model whose jobs run as durable tasks, 2 at a time.
func demoConfig(mockURL, listen, dbPath string) *config.Config {
	cfg := config.Default()
	cfg.Server.Listen = listen
	cfg.Server.LogLevel = "warn"
	cfg.Server.DefaultMaxWait = 60 * time.Second
	cfg.Storage.Path = dbPath
	cfg.Platforms = []config.Platform{
		{Name: "mock", Kind: "openai", BaseURL: mockURL},
	}
	cfg.PlatformModels = []config.PlatformModel{
		{Name: "mock/gpt-4o-mini", Platform: "mock", Upstream: "gpt-4o-mini", Concurrency: 2, QueueLimit: 100},
		{Name: "mock/text-embedding-3-small", Platform: "mock", Upstream: "text-embedding-3-small", Concurrency: 8},
		{Name: "mock/gpt-image-1", Platform: "mock", Upstream: "gpt-image-1", Concurrency: 1},
		{Name: "mock/tts-1", Platform: "mock", Upstream: "tts-1", Concurrency: 2},
		{Name: "mock/sora-2", Platform: "mock", Upstream: "sora-2", Concurrency: 2},
	}
	cfg.Models = []config.Model{
		{Name: "gpt-4o-mini", Kind: weir.KindChat, Candidates: []config.Candidate{{PlatformModel: "mock/gpt-4o-mini", Weight: 1}}},
		{Name: "text-embedding-3-small", Kind: weir.KindEmbeddings, Candidates: []config.Candidate{{PlatformModel: "mock/text-embedding-3-small", Weight: 1}}},
		{Name: "gpt-image-1", Kind: weir.KindImages, Candidates: []config.Candidate{{PlatformModel: "mock/gpt-image-1", Weight: 1}}},
		{Name: "tts-1", Kind: weir.KindSpeech, Candidates: []config.Candidate{{PlatformModel: "mock/tts-1", Weight: 1}}},
		{Name: "sora-2", Kind: weir.KindVideo, Candidates: []config.Candidate{{PlatformModel: "mock/sora-2", Weight: 1}}},
	}
	cfg.Groups = []config.Group{{Name: "default", RoundRobin: true}}
	return cfg
}

func runDemo(ctx context.Context, out io.Writer, o demoOptions) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	// The mock provider, in process.
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mockSrv := &http.Server{Handler: mock.New(mock.Config{Latency: o.latency, TokensPerSecond: 20, CompletionTokens: 16, JobDuration: 20 * time.Second, MaxJobs: 2}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = mockSrv.Serve(mln) }()
	defer mockSrv.Close()
	mockURL := "http://" + mln.Addr().String() + "/v1"

	dir := o.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "weir-demo-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	cfg := demoConfig(mockURL, o.listen, filepath.Join(dir, "weir.db"))
	m := &Main{Config: cfg, Logger: newLogger(cfg.Server.LogLevel)}
	if err := m.Start(ctx); err != nil {
		_ = m.Stop(context.Background())
		return err
	}
	defer m.Stop(context.Background())
	key := weir.APIKey{Name: "demo", Group: "default"}
	secret, err := createKey(ctx, m.DB, &key)
	if err != nil {
		return err
	}
	base := "http://" + m.Addr()
	fmt.Fprintf(out, `Weir is serving on %s (mock provider on %s).

Demo key: %s

Try:
  curl %s/v1/chat/completions -H "Authorization: Bearer %s" \
    -H "Content-Type: application/json" \
    -d '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello"}]}'

  curl -N %s/v1/chat/completions -H "Authorization: Bearer %s" \
    -H "Content-Type: application/json" \
    -d '{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Hello"}]}'

  curl %s/v1/videos -H "Authorization: Bearer %s" \
    -H "Content-Type: application/json" -d '{"model":"sora-2","prompt":"a weir at dawn"}'
  weir tasks --addr %s --key %s wait VIDEO_ID   # a durable task: 20s jobs, 2 at a time

  weir queues --addr %s      # what is held and waiting, scope by scope
  curl %s/metrics            # Prometheus metrics

`, base, mockURL, secret, base, secret, base, secret, base, secret, base, secret, base, base)

	if o.burst > 0 {
		if err := demoBurst(ctx, out, m, base, secret, o.burst); err != nil {
			return err
		}
	}
	if o.exit {
		return nil
	}
	fmt.Fprintln(out, "Serving until Ctrl-C.")
	<-ctx.Done()
	return nil
}

// demoBurst sends n chat requests at once at the capacity-2 model and
// draws the queue draining, then prints each request's wait.
func demoBurst(ctx context.Context, out io.Writer, m *Main, base, secret string, n int) error {
	fmt.Fprintf(out, "A burst of %d requests at gpt-4o-mini, whose platform allows 2 at a time:\n\n", n)
	type result struct {
		status int
		waited string
		took   time.Duration
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	start := time.Now()
	body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello"}]}`)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+secret)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				results[i] = result{status: 0, took: time.Since(start)}
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			results[i] = result{status: resp.StatusCode, waited: resp.Header.Get("X-Weir-Queue-Wait-Ms"), took: time.Since(start)}
		}()
		time.Sleep(20 * time.Millisecond) // arrive in a visible order
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(150 * time.Millisecond)
	defer tick.Stop()
	for {
		st, _ := m.Engine.Scope(ctx, weir.PlatformModelScope("mock/gpt-4o-mini"))
		finished := 0
		for _, r := range results {
			if r.status != 0 {
				finished++
			}
		}
		fmt.Fprintf(out, "\r  running %s  waiting %s  done %s  %5.1fs ",
			bar(int(st.Used), 2), bar(st.Queued, n), bar(finished, n), time.Since(start).Seconds())
		select {
		case <-done:
			fmt.Fprintf(out, "\r  running %s  waiting %s  done %s  %5.1fs \n\n", bar(0, 2), bar(0, n), bar(n, n), time.Since(start).Seconds())
			for i, r := range results {
				w, _ := strconv.Atoi(r.waited)
				fmt.Fprintf(out, "  request %d: HTTP %d after %5.2fs, of which %5.2fs queued\n", i+1, r.status, r.took.Seconds(), float64(w)/1000)
			}
			fmt.Fprintln(out, "\nNo 429s: the burst waited its turn, in arrival order, never more than 2 at the provider.")
			fmt.Fprintln(out)
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func bar(n, of int) string {
	if of <= 0 {
		return ""
	}
	n = max(0, min(n, of))
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", of-n) + "]" + fmt.Sprintf(" %d", n)
}
