package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/httpapi"
	"github.com/weir-gateway/weir/provider/mock"
	"github.com/weir-gateway/weir/serve"
)

func init() { rootCmd.AddCommand(demoCmd()) }

type demoOptions struct {
	listen  string
	dir     string
	burst   int
	latency time.Duration
	exit    bool
	// redraw draws the burst's progress in place (a terminal); else it is
	// written as plain lines, one a second.
	redraw bool
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
			o.redraw = isTerminal(cmd.OutOrStdout())
			return runDemo(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	cmd.Flags().StringVar(&o.listen, "listen", "127.0.0.1:8080", "gateway address (port 0 picks a free one)")
	cmd.Flags().StringVar(&o.dir, "dir", "", "directory for the demo database (default: a temporary one)")
	cmd.Flags().IntVar(&o.burst, "burst", 8, "requests in the burst (0: none); the model's queue and wait limits grow to fit it")
	cmd.Flags().DurationVar(&o.latency, "latency", 1500*time.Millisecond, "mock provider latency per request")
	cmd.Flags().BoolVar(&o.exit, "exit", false, "exit after the burst instead of serving")
	return cmd
}

// The burst's model: a platform allowing 2 requests at a time, and what
// the demo's mock takes to answer one besides its latency (16 tokens at
// 20 a second).
const (
	demoChatPM     = "mock/gpt-4o-mini"
	demoChatSlots  = 2
	demoChatTokens = 16
	demoChatTPS    = 20
)

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
	usd := func(s string) weir.Money { m, _ := weir.ParseMoney(s); return m } // list prices, in dollars
	cfg.PlatformModels = []config.PlatformModel{
		{Name: demoChatPM, Platform: "mock", Upstream: "gpt-4o-mini", Limits: weir.Limits{Concurrency: demoChatSlots, QueueLimit: 100},
			Price: weir.Price{Input: usd("0.15"), CachedInput: usd("0.075"), Output: usd("0.60")}},
		{Name: "mock/text-embedding-3-small", Platform: "mock", Upstream: "text-embedding-3-small", Limits: weir.Limits{Concurrency: 8},
			Price: weir.Price{Input: usd("0.02")}},
		{Name: "mock/gpt-image-1", Platform: "mock", Upstream: "gpt-image-1", Limits: weir.Limits{Concurrency: 1},
			Price: weir.Price{Images: map[string]weir.Money{"1024x1024/low": usd("0.011"), "1024x1024/medium": usd("0.042"), "*": usd("0.167")}}},
		{Name: "mock/tts-1", Platform: "mock", Upstream: "tts-1", Limits: weir.Limits{Concurrency: 2}, Price: weir.Price{Characters: usd("15")}},
		{Name: "mock/sora-2", Platform: "mock", Upstream: "sora-2", Limits: weir.Limits{Concurrency: 2}, Price: weir.Price{Second: usd("0.10")}},
	}
	cfg.Models = []config.Model{
		{Name: "gpt-4o-mini", Kind: weir.KindChat, Candidates: []config.Candidate{{PlatformModel: demoChatPM, Weight: 1}}},
		{Name: "text-embedding-3-small", Kind: weir.KindEmbeddings, Candidates: []config.Candidate{{PlatformModel: "mock/text-embedding-3-small", Weight: 1}}},
		{Name: "gpt-image-1", Kind: weir.KindImages, Candidates: []config.Candidate{{PlatformModel: "mock/gpt-image-1", Weight: 1}}},
		{Name: "tts-1", Kind: weir.KindSpeech, Candidates: []config.Candidate{{PlatformModel: "mock/tts-1", Weight: 1}}},
		{Name: "sora-2", Kind: weir.KindVideo, Candidates: []config.Candidate{{PlatformModel: "mock/sora-2", Weight: 1}}},
	}
	cfg.Groups = []config.Group{{Name: "default", RoundRobin: true}}
	return cfg
}

// fitBurst makes room for a burst of n requests answered in about per
// each: the burst's model queues them all (queue_limit at least n), and
// none waits past the default cap before its turn comes (twice the time
// the whole burst takes, at least a minute). A demo burst that bounced
// off its own limits would show the opposite of what it is for.
func fitBurst(cfg *config.Config, n int, per time.Duration) {
	for i := range cfg.PlatformModels {
		if pm := &cfg.PlatformModels[i]; pm.Name == demoChatPM {
			pm.QueueLimit = max(pm.QueueLimit, n)
		}
	}
	waves := (n + demoChatSlots - 1) / demoChatSlots
	cfg.Server.DefaultMaxWait = max(cfg.Server.DefaultMaxWait, 2*time.Duration(waves)*per)
}

// demoPer is about how long the demo's mock takes to answer one chat
// request at the given latency.
func demoPer(latency time.Duration) time.Duration {
	return latency + demoChatTokens*time.Second/demoChatTPS
}

func runDemo(ctx context.Context, out io.Writer, o demoOptions) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	// The mock provider, in process.
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	up := mock.New(mock.Config{Latency: o.latency, TokensPerSecond: demoChatTPS, CompletionTokens: demoChatTokens, JobDuration: 20 * time.Second, MaxJobs: 2})
	mockSrv := &http.Server{Handler: up, ReadHeaderTimeout: 10 * time.Second}
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
	fitBurst(cfg, o.burst, demoPer(o.latency))
	log := newDemoLog(out)
	log.quiet.Store(o.burst > 0)
	m := &serve.Main{Config: cfg, Logger: slog.New(log)}
	if err := m.Start(ctx); err != nil {
		_ = m.Stop(context.Background())
		return err
	}
	defer m.Stop(context.Background())
	key := weir.APIKey{Name: "demo", Group: "default"}
	secret, err := serve.CreateKey(ctx, m.DB, &key)
	if err != nil {
		return err
	}
	base := "http://" + m.Addr()
	weirCmd := selfCommand()
	fmt.Fprintf(out, `Weir is serving on %[1]s (mock provider on %[2]s).

Demo key: %[3]s

Try:
  curl %[1]s/v1/chat/completions -H "Authorization: Bearer %[3]s" \
    -H "Content-Type: application/json" \
    -d '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello"}]}'

  curl -N %[1]s/v1/chat/completions -H "Authorization: Bearer %[3]s" \
    -H "Content-Type: application/json" \
    -d '{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Hello"}]}'

  curl %[1]s/v1/videos -H "Authorization: Bearer %[3]s" \
    -H "Content-Type: application/json" -d '{"model":"sora-2","prompt":"a weir at dawn"}'
  %[4]s tasks --addr %[1]s --key %[3]s wait VIDEO_ID   # a durable task: 20s jobs, 2 at a time

  %[4]s queues --addr %[1]s      # what is held and waiting, scope by scope
  curl %[1]s/metrics            # Prometheus metrics

`, base, mockURL, secret, weirCmd)

	if o.burst > 0 {
		if err := demoBurst(ctx, out, o.redraw, m, up, base, secret, o.burst); err != nil {
			return err
		}
	}
	log.quiet.Store(false)
	if o.exit {
		return nil
	}
	fmt.Fprintln(out, "Serving until Ctrl-C; each request is shown below as it ends.")
	<-ctx.Done()
	return nil
}

// selfCommand is how to run this binary again from where it was started:
// `go run ./cmd/weir` when go run built it, else the name it was run by.
func selfCommand() string {
	exe := os.Args[0]
	if strings.Contains(filepath.ToSlash(exe), "/go-build") {
		return "go run ./cmd/weir"
	}
	return exe
}

// burstResult is how one request of the burst ended.
type burstResult struct {
	status int           // 0: no answer
	code   string        // the error's code, when it was one
	waited time.Duration // queued, as the gateway said (answers that reached the provider)
	took   time.Duration // from the burst's start to the answer
}

// demoBurst sends n chat requests at once at the capacity-2 model and
// draws the queue draining (in place with redraw, else a line a second),
// then says how each request ended.
func demoBurst(ctx context.Context, out io.Writer, redraw bool, m *serve.Main, up *mock.Server, base, secret string, n int) error {
	fmt.Fprintf(out, "A burst of %d requests at gpt-4o-mini, whose platform allows %d at a time:\n\n", n, demoChatSlots)
	results := make([]burstResult, n)
	var wg sync.WaitGroup
	start := time.Now()
	body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello"}]}`)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = burstRequest(ctx, base, secret, body)
			results[i].took = time.Since(start)
		}()
		time.Sleep(20 * time.Millisecond) // arrive in a visible order
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(150 * time.Millisecond)
	defer tick.Stop()
	progress := progressLine{w: out, inPlace: redraw, every: time.Second}
	line := func(used, queued int) string {
		return fmt.Sprintf("  running %s  waiting %s  %5.1fs ", bar(used, demoChatSlots), bar(queued, n), time.Since(start).Seconds())
	}
	for {
		st, _ := m.Engine.Scope(ctx, weir.PlatformModelScope(demoChatPM))
		progress.show(time.Now(), line(int(st.Used), st.Queued))
		select {
		case <-done:
			progress.done(line(0, 0))
			fmt.Fprintln(out)
			reportBurst(out, results, up.Stats().PeakInFlight, m.Config)
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func burstRequest(ctx context.Context, base, secret string, body []byte) burstResult {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return burstResult{code: err.Error()}
	}
	defer resp.Body.Close()
	r := burstResult{status: resp.StatusCode}
	if ms, err := strconv.Atoi(resp.Header.Get(httpapi.HeaderQueueWait)); err == nil {
		r.waited = time.Duration(ms) * time.Millisecond
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e)
		r.code = e.Error.Code
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return r
}

// reportBurst says what happened to the burst: each request (for a small
// burst), the answers counted by status and code, how many queued and
// for how long, and how many the provider had at once at most; and says
// "no 429s" only when it is so.
func reportBurst(out io.Writer, results []burstResult, peak int64, cfg *config.Config) {
	n := len(results)
	if n <= 16 {
		for i, r := range results {
			fmt.Fprintf(out, "  request %2d: %s after %5.2fs, of which %5.2fs queued\n", i+1, r.outcome(), r.took.Seconds(), r.waited.Seconds())
		}
		fmt.Fprintln(out)
	}
	counts := map[string]int{}
	var outcomes []string
	var waits []time.Duration
	for _, r := range results {
		o := r.outcome()
		if counts[o] == 0 {
			outcomes = append(outcomes, o)
		}
		counts[o]++
		if r.waited > 0 {
			waits = append(waits, r.waited)
		}
	}
	slices.Sort(outcomes)
	parts := make([]string, len(outcomes))
	for i, o := range outcomes {
		parts[i] = fmt.Sprintf("%d × %s", counts[o], o)
	}
	fmt.Fprintf(out, "  answers: %s\n", strings.Join(parts, ", "))
	if len(waits) > 0 {
		slices.Sort(waits)
		fmt.Fprintf(out, "  queued:  %d of %d waited their turn, %.1fs at the median and %.1fs at most\n",
			len(waits), n, waits[len(waits)/2].Seconds(), waits[len(waits)-1].Seconds())
	}
	fmt.Fprintf(out, "  the provider had %d at once at most (its platform allows %d)\n\n", peak, demoChatSlots)
	if counts["HTTP 200"] == n && peak <= demoChatSlots {
		fmt.Fprintf(out, "No 429s: every request waited its turn and was answered, never more than %d at the provider.\n\n", demoChatSlots)
		return
	}
	fmt.Fprintf(out, "Not every request got through. queue_full: more were waiting than the model's queue_limit (%d) allows;\n"+
		"queue_timeout: one waited longer than the %s cap (server.default_max_wait). Both are limits\n"+
		"the config sets, answered with a code that says which, not a provider's bare 429.\n\n",
		demoQueueLimit(cfg), cfg.Server.DefaultMaxWait)
}

func demoQueueLimit(cfg *config.Config) int {
	for _, pm := range cfg.PlatformModels {
		if pm.Name == demoChatPM {
			return pm.QueueLimit
		}
	}
	return 0
}

// outcome is "HTTP 200", "HTTP 429 queue_full" or "no answer (why)".
func (r burstResult) outcome() string {
	switch {
	case r.status == 0:
		return "no answer (" + r.code + ")"
	case r.code != "":
		return fmt.Sprintf("HTTP %d %s", r.status, r.code)
	default:
		return fmt.Sprintf("HTTP %d", r.status)
	}
}

func bar(n, of int) string {
	if of <= 0 {
		return ""
	}
	n = max(0, min(n, of))
	width := min(of, 40) // a long queue is drawn to scale
	fill := n * width / of
	if n > 0 && fill == 0 {
		fill = 1
	}
	return "[" + strings.Repeat("#", fill) + strings.Repeat(".", width-fill) + "]" + fmt.Sprintf(" %3d", n)
}

// demoLog is the demo's log: a line per HTTP request as it ends (time,
// method, path, status, duration, and for a model request its model and
// how long it queued), and every warning and error; nothing else. While
// quiet (the burst draws its own picture) request lines are left out.
type demoLog struct {
	*demoLogState
	attrs []slog.Attr
}

type demoLogState struct {
	quiet atomic.Bool

	mu sync.Mutex
	w  io.Writer
}

func newDemoLog(w io.Writer) *demoLog {
	return &demoLog{demoLogState: &demoLogState{w: w}}
}

// Enabled takes debug records too: the request line is one.
func (h *demoLog) Enabled(context.Context, slog.Level) bool { return true }

func (h *demoLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &demoLog{demoLogState: h.demoLogState, attrs: append(slices.Clip(h.attrs), attrs...)}
}

// WithGroup is not used by the gateway's loggers; the demo's lines are
// flat.
func (h *demoLog) WithGroup(string) slog.Handler { return h }

func (h *demoLog) Handle(_ context.Context, r slog.Record) error {
	attrs := make(map[string]slog.Value, len(h.attrs)+r.NumAttrs())
	var order []string
	add := func(a slog.Attr) bool {
		if _, ok := attrs[a.Key]; !ok {
			order = append(order, a.Key)
		}
		attrs[a.Key] = a.Value.Resolve()
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case r.Level >= slog.LevelWarn:
		var b strings.Builder
		fmt.Fprintf(&b, "  %s %s %s", r.Time.Format(time.TimeOnly), r.Level, r.Message)
		for _, k := range order {
			fmt.Fprintf(&b, " %s=%s", k, attrs[k])
		}
		fmt.Fprintln(h.w, b.String())
	case r.Message == "request":
		if h.quiet.Load() {
			return nil
		}
		detail := ""
		if wait, ok := attrs["queue_wait_ms"]; ok {
			detail = fmt.Sprintf("  %s, queued %s", attrs["model"], msDuration(wait))
		}
		fmt.Fprintf(h.w, "  %s %-6s %-28s %d  %s%s\n", r.Time.Format(time.TimeOnly), attrs["method"], attrs["path"],
			attrs["status"].Int64(), msDuration(attrs["duration_ms"]), detail)
	}
	return nil
}

// msDuration reads a *_ms log value as a duration, for people.
func msDuration(v slog.Value) string {
	var ms float64
	switch v.Kind() {
	case slog.KindFloat64:
		ms = v.Float64()
	case slog.KindInt64:
		ms = float64(v.Int64())
	default:
		return "?"
	}
	d := time.Duration(ms * float64(time.Millisecond))
	if d < time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}
