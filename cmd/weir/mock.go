package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-gateway/weir/provider/mock"
)

func init() { rootCmd.AddCommand(mockCmd()) }

func mockCmd() *cobra.Command {
	var (
		listen   string
		drain    time.Duration
		cfg      mock.Config
		distName string
	)
	cmd := &cobra.Command{
		Use:   "mock-provider",
		Short: "Serve the mock OpenAI-compatible provider",
		Long: `Serve the mock provider: the OpenAI endpoints (chat completions with SSE
streaming, embeddings, images, audio speech, models) with configurable
latency, paced streaming, its own concurrency cap answered with 429, error
and stall rates; and the asynchronous video API (POST /v1/videos, then GET
/v1/videos/{id} until done, GET .../content, DELETE) whose jobs run for
--job-duration, fail at --job-failure-rate, are capped by --max-jobs and
honour Idempotency-Key. Tests steer it per request with X-Mock-* headers and
at run time through POST /mock/config; GET /mock/stats counts what it served
and GET /mock/jobs lists the video jobs it holds.
See 'go doc github.com/weir-gateway/weir/provider/mock'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Distribution = mock.Distribution(distName)
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("mock-provider: %w", err)
			}
			return serveMock(cmd.Context(), listen, drain, cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", mockListenDefault(), "address to listen on (port 0 picks a free one); default: the host and port of WEIR_MOCK_URL, the URL the examples' platforms point at, or 127.0.0.1:9090")
	f.DurationVar(&drain, "shutdown-timeout", 5*time.Second, "how long SIGINT/SIGTERM waits for in-flight requests before closing them")
	f.DurationVar(&cfg.Latency, "latency", 0, "base time to first byte of every request")
	f.DurationVar(&cfg.LatencyJitter, "latency-jitter", 0, "spread of the latency, per --distribution")
	f.StringVar(&distName, "distribution", string(mock.DefaultDistribution), "how the jitter spreads: fixed, uniform, normal or exponential")
	f.Float64Var(&cfg.TokensPerSecond, "tokens-per-second", 0, "generation pace (0: no pacing)")
	f.IntVar(&cfg.CompletionTokens, "completion-tokens", mock.DefaultCompletionTokens, "length of an answer in tokens")
	f.IntVar(&cfg.MaxConcurrent, "max-concurrent", 0, "concurrent requests served before answering 429 (0: unlimited)")
	f.DurationVar(&cfg.RetryAfter, "retry-after", mock.DefaultRetryAfter, "Retry-After sent with 429 and 503")
	f.Float64Var(&cfg.ErrorRate, "error-rate", 0, "fraction of requests answered 500")
	f.Float64Var(&cfg.StallRate, "stall-rate", 0, "fraction of streams that stall halfway")
	f.DurationVar(&cfg.StallFor, "stall-for", mock.DefaultStallFor, "how long a stalled stream stops sending")
	f.Uint64Var(&cfg.Seed, "seed", 0, "seed of the random decisions (latency, errors, stalls)")
	f.StringSliceVar(&cfg.Models, "models", nil, "models served, comma-separated (default: list a few, accept any name)")
	f.DurationVar(&cfg.JobDuration, "job-duration", 0, "how long a video job runs from submit to its end (0: done at once)")
	f.Float64Var(&cfg.JobFailureRate, "job-failure-rate", 0, "fraction of video jobs that end failed")
	f.IntVar(&cfg.MaxJobs, "max-jobs", 0, "video jobs running at once before a submit is answered 429 (0: unlimited)")
	f.DurationVar(&cfg.JobRetention, "job-retention", mock.DefaultJobRetention, "how long a finished video job is kept (its expires_at) before it is forgotten")
	return cmd
}

// mockListenDefault is the mock's address unless --listen gives one: the
// host and port of WEIR_MOCK_URL when it is set, so that one variable
// moves the mock and the examples' platforms (examples/*.yaml) together;
// else 127.0.0.1:9090, where the examples look without it.
func mockListenDefault() string {
	u, err := url.Parse(os.Getenv("WEIR_MOCK_URL"))
	if err != nil || u.Hostname() == "" {
		return "127.0.0.1:9090"
	}
	port := u.Port()
	switch {
	case port != "":
	case u.Scheme == "https":
		port = "443"
	default:
		port = "80"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// serveMock serves the mock provider on addr until ctx ends or SIGINT or
// SIGTERM arrives, then drains in-flight requests for up to drain.
func serveMock(ctx context.Context, addr string, drain time.Duration, cfg mock.Config) error {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("mock-provider: %w", err)
	}
	srv := &http.Server{
		Handler:           mock.New(cfg),
		ReadHeaderTimeout: 10 * time.Second,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("mock provider listening", "url", "http://"+ln.Addr().String()+"/v1",
		"latency", cfg.Latency.String(), "max_concurrent", cfg.MaxConcurrent,
		"tokens_per_second", cfg.TokensPerSecond, "error_rate", cfg.ErrorRate, "stall_rate", cfg.StallRate,
		"job_duration", cfg.JobDuration.String(), "job_failure_rate", cfg.JobFailureRate, "max_jobs", cfg.MaxJobs)

	select {
	case err := <-served:
		return fmt.Errorf("mock-provider: %w", err)
	case <-ctx.Done():
	}
	log.Info("mock provider shutting down", "drain", drain.String())
	sctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close() // held and stalled requests end with their connections
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("mock-provider: %w", err)
	}
	return nil
}
