package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/loadgen"
	"github.com/weir-gateway/weir/provider/mock"
)

// OverheadConfig says how Overhead drives its three targets; the
// defaults are `weir-bench`'s flags'.
type OverheadConfig struct {
	Weir Weir

	Rate             float64       // requests per second, open loop (2000)
	Duration         time.Duration // measured time per target (20s)
	Warmup           time.Duration // warm-up per target, left out of the figures (10s)
	Rounds           int           // the three targets driven in turn this many times (1)
	Stream           float64       // fraction of requests that stream, 20 chunks 5 ms apart (0)
	Concurrency      int           // most requests in flight at once, open loop (256)
	MaxRPS           bool          // a closed loop of Connections workers instead: sustained throughput
	Connections      int           // closed-loop workers for MaxRPS (64)
	CompletionTokens int           // tokens in a non-streamed answer; 80 make about 1 KB (80)
	CPUProfile       string        // a CPU profile of ProfileTarget's measured phase, first round, goes here
	Trace            string        // an execution trace of the same goes here
	MemProfile       string        // the allocations of the same go here, those before it in MemProfile+".base"
	HeapFloor        int64         // the gateway's heap floor (package gcfloor): this process's, which the caller keeps, or with OutOfProcess the weir child's
	// Ports is the first of the loopback ports the rig's listeners take
	// in turn (the mock, the proxy, Weir, its edge listener), each the
	// next free one; 0 leaves each to the kernel, which picks from the
	// ephemeral range that the load generator's connections use too.
	// Default DefaultPorts.
	Ports         int
	ProfileTarget string // direct, proxy, weir, with Edge edge, with Dialects responses or messages, with Budgets budgets, with Tracing weir+trace or weir' (weir)
	// Edge adds the target "edge": the same gateway, with an edge
	// listener, tunnelling each request to a node agent in this process
	// (package node, as `weir node` runs it) whose one provider is the
	// same mock; its model routes to the node alone.
	Edge bool
	// Dialects adds the targets of the translated paths, the same gateway
	// and model asked through another API and judged against weir (the
	// Chat Completions each is translated to): "responses", OpenAI's
	// Responses API, and "messages", Anthropic's Messages API.
	Dialects bool
	// Budgets adds the target "budgets": the same gateway and platform
	// model, now priced, asked by a key of another group for another
	// public model, where that key, group and model each have a hard
	// budget never reached (budgetsCatalog), so that each request
	// reserves its estimated cost in three budget scopes and settles its
	// real cost; judged against weir, whose key, group and model have
	// none. Default false.
	Budgets bool
	// Tracing adds the targets "weir+trace", a gateway like weir's in
	// this process (Weir.StartTraced) that traces every request and
	// exports its spans by OTLP/HTTP to a receiver in this process, and
	// "weir'", another untraced one: weir, weir+trace and weir' are three
	// gateways built alike, started afresh every round with their roles
	// turned (traceTrio), so that weir+trace is judged against weir
	// with no instance keeping an edge of its own, and weir' against
	// weir shows how far two untraced instances differ in the same run.
	// Not with Edge, Dialects, Budgets, Fleet or ConsoleWatcher, whose
	// targets need a gateway that lasts the run. Default false.
	Tracing bool
	// Interleave, with Dialects, Budgets or Tracing, drives direct, proxy, weir
	// and their targets together, each round, on one open loop at Rate
	// (each target an equal share; loadgen.RunInterleaved), so that
	// every target's latency comes from the same seconds; a pass of each
	// target alone follows the rounds for the cost table. Open loop
	// only, and without Edge, Fleet or ConsoleWatcher. Default false: in
	// turn.
	Interleave bool
	// OutOfProcess runs the targets proxy and weir each as a child
	// process instead of in this one: the plain proxy (ServeProxy, from
	// Weir.FloorExe and Weir.ProxyArgs) and `weir serve` on SQLite (from
	// Weir.Exe), with Weir's catalog and limits, so that each one's CPU
	// time and memory, read from /proc, are its own, and neither shares a
	// runtime (its collector, its scheduler) with the load generator, the
	// mock or the other. direct, the mock, stays in this process. Not with
	// Edge, Dialects, Budgets, Interleave, Fleet or ConsoleWatcher.
	// Default false.
	OutOfProcess bool
	// HeapFloorSet, with OutOfProcess, gives the weir child HeapFloor as
	// its server.heap_floor; otherwise it keeps its config's default.
	HeapFloorSet bool
	// Fleet, with Replicas set, adds two targets run as `weir serve`
	// children: "serve", one gateway on SQLite (the fleet's baseline), and
	// "fleet", the replicas on PostgreSQL, which the load reaches in turn.
	Fleet FleetConfig
	// ConsoleWatcher, when set, adds the target "console": the same
	// gateway as "weir", driven while this command (and its arguments)
	// watches the gateway's web console, e.g. a headless browser with
	// the overview open. It gets the console's URL in WEIR_URL, must
	// print a line "watching" once the page is live, and is killed after
	// the target's phase.
	ConsoleWatcher []string
}

// The request every target gets: about 130 bytes of chat.
const (
	chatPM         = "mock/gpt-4o-mini"
	chatBody       = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Write one short paragraph on why a gateway queues a burst of work."}]}`
	chatStreamBody = `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Write one short paragraph on why a gateway queues a burst of work."}]}`
	// responsesBody and responsesStreamBody ask the Responses API for what
	// chatBody asks: Weir translates them to it, and its answer back.
	responsesBody       = `{"model":"gpt-4o-mini","input":"Write one short paragraph on why a gateway queues a burst of work."}`
	responsesStreamBody = `{"model":"gpt-4o-mini","stream":true,"input":"Write one short paragraph on why a gateway queues a burst of work."}`
	// messagesBody and messagesStreamBody ask Anthropic's Messages API
	// for the same.
	messagesBody       = `{"model":"gpt-4o-mini","max_tokens":1024,"messages":[{"role":"user","content":"Write one short paragraph on why a gateway queues a burst of work."}]}`
	messagesStreamBody = `{"model":"gpt-4o-mini","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"Write one short paragraph on why a gateway queues a burst of work."}]}`
	// generous is every scope's concurrency limit: checked, never reached.
	generous = 1_000_000
)

type overheadTarget struct {
	name   string
	urls   []string // each request goes to the next one in turn
	header http.Header
	procs  []*child // the processes serving it, other than this one
	// mem is its memory at the end of each measured phase, a phase each.
	mem *memLog
	// watch is a command that watches the target's console while it is
	// driven (OverheadConfig.ConsoleWatcher); nil: none.
	watch []string
	// consoleURL is the gateway's console, for watch.
	consoleURL string
	// body and streamBody are its requests; "": chatBody and
	// chatStreamBody.
	body, streamBody string
}

// requests are the bodies of t's plain and streaming requests.
func (t overheadTarget) requests() (plain, stream string) {
	if t.body == "" {
		return chatBody, chatStreamBody
	}
	return t.body, t.streamBody
}

// overheadRig is what the targets run on: the mock, the proxy and Weir.
type overheadRig struct {
	targets  []overheadTarget
	gateway  Gateway
	serve    *child         // with OverheadConfig.Fleet: one `weir serve` on SQLite
	fleet    *fleetRun      // and the replicas
	edge     *edgeNode      // with OverheadConfig.Edge: the node agent
	budgets  *budgetsTarget // with OverheadConfig.Budgets: its key and budget scopes
	trace    *traceTrio     // with OverheadConfig.Tracing: weir, weir+trace and weir', and the receiver
	logLevel string
	key      weir.APIKey
	secret   string   // the key's, with OverheadConfig.OutOfProcess
	ports    portPlan // where its listeners go (OverheadConfig.Ports)
	answer   int      // bytes of a non-streamed answer
	closers  []func()
}

func (r *overheadRig) close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

// labelled runs f with the pprof label component=name, which every
// goroutine f starts inherits.
func labelled(ctx context.Context, name string, f func(context.Context)) {
	pprof.Do(ctx, pprof.Labels("component", name), f)
}

// serve serves h on the rig's next loopback port from a goroutine
// labelled component.
func serve(ctx context.Context, rig *overheadRig, component string, h http.Handler) (string, error) {
	ln, err := rig.ports.listen()
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	labelled(ctx, component, func(context.Context) { go func() { _ = srv.Serve(ln) }() })
	rig.closers = append(rig.closers, func() { _ = srv.Close() })
	return "http://" + ln.Addr().String(), nil
}

// startOverheadRig starts the mock, the plain proxy in front of it and
// Weir, makes them the targets direct, proxy and weir (and console, edge,
// serve and fleet when c asks for them), and probes each target.
func startOverheadRig(ctx context.Context, c OverheadConfig) (_ *overheadRig, err error) {
	rig := &overheadRig{ports: portPlan{next: c.Ports}}
	defer func() {
		if err != nil {
			rig.close()
		}
	}()
	mockURL, err := serve(ctx, rig, "mock", overheadMock(c))
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "weir-bench-")
	if err != nil {
		return nil, err
	}
	rig.closers = append(rig.closers, func() { _ = os.RemoveAll(dir) })
	plain := http.Header{"Content-Type": {"application/json"}}
	const chat = "/v1/chat/completions"
	if c.OutOfProcess {
		proxy, gw, err := startChildTargets(ctx, c, rig, dir, mockURL)
		if err != nil {
			return nil, err
		}
		rig.targets = []overheadTarget{
			{name: "direct", urls: []string{mockURL + chat}, header: plain},
			{name: "proxy", urls: []string{proxy.url + chat}, header: plain, procs: []*child{proxy}},
			{name: "weir", urls: []string{gw.url + chat}, header: weirHeader(rig.secret), procs: []*child{gw}},
		}
		return rig, rig.probeTargets(ctx)
	}
	proxyURL, err := serve(ctx, rig, "proxy", plainProxy(mockURL))
	if err != nil {
		return nil, err
	}
	rig.targets = []overheadTarget{
		{name: "direct", urls: []string{mockURL + chat}, header: plain},
		{name: "proxy", urls: []string{proxyURL + chat}, header: plain},
	}
	if c.Tracing {
		if err := startTraceTargets(ctx, c, rig, dir, mockURL+"/v1"); err != nil {
			return nil, err
		}
		return rig, rig.probeTargets(ctx)
	}
	secret, err := startWeirGateway(ctx, c, rig, dir, mockURL+"/v1")
	if err != nil {
		return nil, err
	}

	auth := weirHeader(secret)
	weirURL := "http://" + rig.gateway.Addr()
	rig.targets = append(rig.targets, overheadTarget{name: "weir", urls: []string{weirURL + chat}, header: auth})
	if len(c.ConsoleWatcher) > 0 {
		rig.targets = append(rig.targets, overheadTarget{name: "console", urls: []string{weirURL + chat}, header: auth,
			watch: c.ConsoleWatcher, consoleURL: weirURL + "/"})
	}
	if c.Dialects {
		rig.targets = append(rig.targets, overheadTarget{name: "responses", urls: []string{weirURL + "/v1/responses"}, header: auth,
			body: responsesBody, streamBody: responsesStreamBody})
		anthropic := plain.Clone()
		anthropic.Set("X-Api-Key", secret)
		anthropic.Set("Anthropic-Version", "2023-06-01")
		rig.targets = append(rig.targets, overheadTarget{name: "messages", urls: []string{weirURL + "/v1/messages"}, header: anthropic,
			body: messagesBody, streamBody: messagesStreamBody})
	}
	if c.Budgets {
		if err := startBudgetsTarget(ctx, c, rig, plain); err != nil {
			return nil, err
		}
	}
	if c.Edge {
		if err := startEdgeTarget(ctx, c, rig, mockURL+"/v1", auth); err != nil {
			return nil, err
		}
	}
	if c.Fleet.Replicas > 0 {
		if err := startFleetTargets(ctx, c, rig, dir, mockURL+"/v1"); err != nil {
			return nil, err
		}
	}
	if err := rig.probeTargets(ctx); err != nil {
		return nil, err
	}
	return rig, nil
}

// overheadMock is the mock: instant, ~1 KB answers. Streams, when asked
// for, come from a second mock paced at 5 ms a token (pacing would also
// delay the non-streamed answers), chosen by the body's "stream" field,
// each chunk stamped as it is written.
func overheadMock(c OverheadConfig) http.Handler {
	var upstream http.Handler = mock.New(mock.Config{CompletionTokens: c.CompletionTokens})
	if c.Stream > 0 {
		upstream = streamSplit{
			plain: upstream,
			paced: stamped{mock.New(mock.Config{CompletionTokens: 20, TokensPerSecond: 200})},
		}
	}
	return upstream
}

// startWeirGateway starts Weir on a SQLite file in dir, in front of the
// mock (mockURL, its /v1), with limits never reached: the key, the group
// and the platform model each get a concurrency limit of generous. It
// notes the gateway, its log level and its key in rig, and returns the
// key's secret.
func startWeirGateway(ctx context.Context, c OverheadConfig, rig *overheadRig, dir, mockURL string) (secret string, err error) {
	cfg := overheadCatalog(mockURL, filepath.Join(dir, "weir.db"))
	cfg.Server.Listen = rig.ports.addr()
	if c.Edge {
		edgeCatalog(cfg)
		cfg.Edge.Listen = rig.ports.addr()
	}
	if c.Budgets {
		budgetsCatalog(cfg)
	}
	if err := cfg.Validate(); err != nil {
		return "", fmt.Errorf("bench config: %w", err)
	}
	var gw Gateway
	labelled(ctx, "weir", func(ctx context.Context) { gw, err = c.Weir.Start(ctx, cfg) })
	if err != nil {
		return "", err
	}
	rig.closers = append(rig.closers, func() { _ = gw.Stop(context.Background()) })
	rig.gateway, rig.logLevel = gw, cfg.Server.LogLevel
	rig.key = weir.APIKey{Name: "bench", Group: cfg.DefaultGroup, Limits: weir.Limits{Concurrency: generous}}
	return c.Weir.CreateKey(ctx, gw.Store(), &rig.key)
}

// probeTargets sends one request of each kind through each of rig's
// targets, so that a broken rig fails here and not as a table of errors,
// and notes the length of direct's plain answer.
func (r *overheadRig) probeTargets(ctx context.Context) error {
	for _, t := range r.targets {
		plain, stream := t.requests()
		for _, url := range t.urls {
			for _, body := range []string{plain, stream} {
				n, err := probe(ctx, url, t.header, body)
				if err != nil {
					return fmt.Errorf("%s: %w", t.name, err)
				}
				if t.name == "direct" && body == chatBody {
					r.answer = n
				}
			}
		}
	}
	return nil
}

func (c OverheadConfig) validate() error {
	switch {
	case c.Weir.Start == nil || c.Weir.CreateKey == nil:
		return errors.New("bench: Weir.Start and Weir.CreateKey are required")
	case c.Duration <= 0:
		return fmt.Errorf("--duration must be positive")
	case c.Warmup < 0:
		return fmt.Errorf("--warmup must not be negative")
	case c.Rounds < 1:
		return fmt.Errorf("--rounds must be at least 1")
	case !c.MaxRPS && c.Rate <= 0:
		return fmt.Errorf("--rate must be positive")
	case !c.MaxRPS && c.Concurrency < 1:
		return fmt.Errorf("--concurrency must be positive")
	case c.MaxRPS && c.Connections < 1:
		return fmt.Errorf("--connections must be positive")
	case c.Stream < 0 || c.Stream > 1:
		return fmt.Errorf("--stream must be in [0, 1]")
	case c.ProfileTarget == "edge" && !c.Edge:
		return fmt.Errorf("--profile-target edge needs --edge")
	case (c.ProfileTarget == "responses" || c.ProfileTarget == "messages") && !c.Dialects:
		return fmt.Errorf("--profile-target %s needs --dialects", c.ProfileTarget)
	case c.ProfileTarget == "budgets" && !c.Budgets:
		return fmt.Errorf("--profile-target budgets needs --budgets")
	case (c.ProfileTarget == traceName || c.ProfileTarget == twinName) && !c.Tracing:
		return fmt.Errorf("--profile-target %s needs --tracing", c.ProfileTarget)
	case !slices.Contains([]string{"direct", "proxy", "weir", "edge", "responses", "messages", "budgets", traceName, twinName}, c.ProfileTarget):
		return fmt.Errorf("--profile-target must be direct, proxy, weir, edge, responses, messages, budgets, %s or %s", traceName, twinName)
	case c.Interleave && (!(c.Dialects || c.Budgets || c.Tracing) || c.MaxRPS):
		return fmt.Errorf("--interleave needs --dialects, --budgets or --tracing, and an open loop (not --max-rps)")
	case c.Interleave && (c.Edge || c.Fleet.Replicas > 0 || len(c.ConsoleWatcher) > 0):
		return fmt.Errorf("--interleave drives direct, proxy, weir and the targets of --dialects, --budgets and --tracing alone: not with --edge, --fleet or --console-watcher")
	case c.Tracing && (c.Edge || c.Dialects || c.Budgets || c.Fleet.Replicas > 0 || len(c.ConsoleWatcher) > 0):
		return fmt.Errorf("--tracing restarts weir every round with the roles turned: not with --edge, --dialects, --budgets, --fleet or --console-watcher")
	case c.Tracing && c.Weir.StartTraced == nil:
		return errors.New("bench: Weir.StartTraced is required for the weir+trace target")
	case c.Edge && c.Weir.CreateNode == nil:
		return errors.New("bench: Weir.CreateNode is required for the edge target")
	case c.OutOfProcess:
		return c.validateOutOfProcess()
	}
	if err := c.Fleet.validate(); err != nil {
		return err
	}
	if c.Fleet.Replicas > 0 {
		return c.Weir.child()
	}
	return nil
}

// overheadCatalog is Weir's config for Overhead: the mock as one platform
// behind a chat model whose platform model and group have limits never
// reached, and a log level of warn (a log line per request would
// dominate). The model never looks for edge nodes, so that the weir
// target takes the same path whether or not the gateway has an edge
// listener.
func overheadCatalog(mockURL, dbPath string) *config.Config {
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Server.LogLevel = "warn"
	cfg.Server.DefaultMaxWait = 60 * time.Second
	cfg.Storage.Path = dbPath
	// responses: translate keeps the "responses" target on its translated
	// path, which the mock would otherwise serve as it is.
	cfg.Platforms = []config.Platform{{Name: "mock", Kind: "openai", BaseURL: mockURL, Responses: "translate"}}
	cfg.PlatformModels = []config.PlatformModel{
		{Name: chatPM, Platform: "mock", Upstream: "gpt-4o-mini", Limits: weir.Limits{Concurrency: generous, QueueLimit: generous}},
	}
	cfg.Models = []config.Model{
		{Name: "gpt-4o-mini", Kind: weir.KindChat, Candidates: []config.Candidate{{PlatformModel: chatPM, Weight: 1}}, Nodes: weir.NodesNever},
	}
	cfg.Groups = []config.Group{{Name: cfg.DefaultGroup, RoundRobin: true, Limits: weir.Limits{Concurrency: generous}}}
	return cfg
}

// probe sends one request and returns the answer's length.
func probe(ctx context.Context, url string, header http.Header, body string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header = header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("probe answered %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	return len(b), nil
}

// stamped puts a loadgen stamp before each write of h's answers. The
// paced mock writes a stream one chunk a write, so the load generator
// times each chunk from the moment the mock wrote it
// (loadgen.Config.ChunkStamps).
type stamped struct{ h http.Handler }

func (s stamped) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.h.ServeHTTP(&stampWriter{ResponseWriter: w}, r)
}

type stampWriter struct {
	http.ResponseWriter
	buf []byte
}

func (w *stampWriter) Write(b []byte) (int, error) {
	w.buf = loadgen.AppendStamp(w.buf[:0], time.Now())
	stamp := len(w.buf)
	w.buf = append(w.buf, b...)
	n, err := w.ResponseWriter.Write(w.buf)
	return max(n-stamp, 0), err
}

// Unwrap lets the mock's http.ResponseController flush the writer
// underneath.
func (w *stampWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// streamSplit sends streaming chat requests to paced and the rest to plain.
type streamSplit struct{ plain, paced http.Handler }

func (s streamSplit) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	if bytes.Contains(b, []byte(`"stream":true`)) {
		s.paced.ServeHTTP(w, r)
		return
	}
	s.plain.ServeHTTP(w, r)
}

// Overhead is `weir-bench`: it measures what Weir adds to a request against
// two baselines in the same run (docs/benchmarks.md's overhead-1k,
// overhead-2k, stream and max-rps scenarios). In one process it starts the
// mock provider (0 ms latency, ~1 KB answers) on a loopback listener, a
// plain httputil.ReverseProxy in front of it, and Weir (c.Weir.Start, on a
// temporary SQLite, log level warn) whose chat model is admitted through
// three scopes per request — the key's, its group's and the platform
// model's — with limits so generous that they are checked but never block.
// It then drives each target in turn at the same load with package loadgen
// and prints a line per target as soon as it is measured: its latency
// percentiles, what it adds over direct, and the ratio to the proxy's
// addition on the same line.
//
// A second table gives each target's cost per request — the whole
// process's CPU time and allocations over the measured window divided by
// the requests — so the differences from direct are the targets' own; CPU
// time in an open loop also holds the runtime's spinning between requests,
// so CPU is compared under max-rps, where every target is saturated.
// "others" on each line is the cores other programs kept busy meanwhile
// (from /proc/stat): a run where it is well above 0 was disturbed.
//
// With --stream, two more tables give the streaming requests' time to the
// first and last byte, and a third each streamed chunk's latency from the
// mock's write (a stamp the harness puts before each chunk,
// loadgen.AppendStamp) to the client's read. With --max-rps each target is
// driven by a closed loop of --connections workers instead, and the table
// gives sustained req/s. --rounds N drives the targets in turn N times and
// ends with each column's median, since one stall of a shared machine moves
// a p99.
//
// Every latency line ends with the target's resident memory at the end of
// its measured phase (rss MB, VmRSS), and the cost table gives it with its
// anonymous part (RssAnon) and its peak so far (VmHWM): for a target in
// child processes, theirs; for one in this process, marked "*", this whole
// process's, which it shares with the load generator, the mock and the
// other targets here. With c.OutOfProcess (--out-of-process) the proxy and
// Weir each run as a child process (ServeProxy; `weir serve` on SQLite),
// so that their CPU time and memory are their own: the reference for what
// Weir costs. The listeners take loopback ports from c.Ports (--ports)
// on, below the ephemeral range the load generator's connections use.
//
// With c.Interleave (--interleave, with --dialects, --budgets or
// --tracing), each round drives the targets together instead, one open
// loop at --rate dealing its requests to each in turn (each target an
// equal share of --rate), so that what each adds over direct is
// measured over the same seconds; the whole process's CPU time and
// allocations cannot be split among targets sharing a window, so the
// cost table comes from a pass of each target alone, in turn, after the
// rounds.
//
// With c.Budgets (--budgets), one more target, "budgets", reaches the
// same gateway and platform model (priced with --budgets, for every
// target) through a key of another group asking another public model,
// where that key (in the store, as `weir keys create --budget` makes
// it), that group and that model each have a hard budget of
// 1,000,000 a month (the config file's), never reached: each request
// reserves its estimated cost in the three budget scopes, is journaled,
// settles its real cost and has the budgets' alerts looked at. Its line
// gives its added latency as a multiple of weir's, against 1.1x. Before
// the run, a probe checks that a request settles in all three scopes
// (their spend grows), and after it that the run's did: the run fails
// otherwise.
//
// With c.Tracing (--tracing), weir is one of three gateways built alike
// in this process, A, B and C, started afresh in that order every round
// with the roles turned (traceTrio): the one playing "weir+trace" traces
// every request and exports its spans by OTLP/HTTP to a receiver in this
// process, and weir and "weir'" have no tracing configured. After the
// rounds, the trace-overhead line judges weir+trace's added latency
// against weir's, the median of the rounds' ratios, p50 and p99, against
// 1.15x, and the A/A line beside it gives the same for weir': how far
// two untraced instances differ in the same run.
//
// With c.Fleet.Replicas set (--fleet N), two more targets run as `weir
// serve` child processes with the same catalog and limits: "serve", one
// gateway on a SQLite file (the fleet's baseline), and "fleet", N replicas
// on a PostgreSQL schema of the run's own (dropped after), reached in turn
// as a round-robin load balancer would. Their cost lines count the
// children's CPU time (from /proc) but not their allocations. Under
// --max-rps, pgbench runs on the same server right after the fleet's closed
// loop, for as long (package bench/pgbench), and a fleet-admit line gives
// the fleet's admissions per second against pgbench's TPS.
//
// With c.Edge (--edge), one more target, "edge", reaches the same gateway
// for a model that edge nodes alone serve: a node agent in this process
// (package node, configured as `weir node` is) dials the gateway's edge
// listener and registers the same mock as its one provider with 4,096
// slots (package edge's most), so each request is tunnelled gateway → node
// (gRPC) → mock. Its line gives what the tunnel adds (edge's percentile
// minus weir's) beside what the plain proxy's hop adds (proxy's minus
// direct's).
//
// --cpuprofile and --trace cover the measured part of one target's first
// round (--profile-target, default weir); every goroutine carries a pprof
// label "component" (loadgen, mock, proxy, weir or node), so that
// `go tool pprof -tagfocus component=weir` shows Weir's own time. The
// commands, the columns and the latest figures are in docs/benchmarks.md.
func Overhead(ctx context.Context, out io.Writer, c OverheadConfig) error {
	if err := c.validate(); err != nil {
		return err
	}
	rig, err := startOverheadRig(ctx, c)
	if err != nil {
		return err
	}
	defer rig.close()
	for i := range rig.targets {
		rig.targets[i].mem = &memLog{}
	}

	printOverheadSetup(out, c, rig)
	results, err := c.driveRounds(ctx, out, rig)
	if err != nil {
		return err
	}
	rep := overheadReport{out: out, c: c, rig: rig, results: results, costs: results}
	if c.Rounds > 1 {
		rep.printMedians()
	}
	if c.Interleave {
		if rep.costs, err = c.costPass(ctx, out, rig); err != nil {
			return err
		}
	}
	if c.Stream > 0 && !c.MaxRPS {
		rep.printStreams()
	}
	rep.printCosts()
	rep.printFailures()
	rep.printScopes(ctx)
	if err := rep.printBudgetScopes(ctx); err != nil {
		return err
	}
	if rig.trace != nil {
		fmt.Fprintln(out, rig.trace.report())
	}
	rep.printLogWarnings()
	fmt.Fprintf(out, "load average at the end: %s\n", loadAverage())
	return nil
}

// driveRounds drives rig's targets in turn, c.Rounds times, and returns
// each target's results, a round each. It prints as the run goes: a line
// per target, once it is measured, and under MaxRPS the fleet-admit line
// after the fleet's.
func (c OverheadConfig) driveRounds(ctx context.Context, out io.Writer, rig *overheadRig) (overheadResults, error) {
	if c.Interleave {
		return c.driveInterleaved(ctx, out, rig)
	}
	results := overheadResults{}
	for round := 1; round <= c.Rounds; round++ {
		if err := c.beginRound(ctx, out, rig, round); err != nil {
			return nil, err
		}
		rows := map[string]row{}
		for _, t := range rig.targets {
			res, err := c.drive(ctx, t, round)
			if err != nil {
				return nil, err
			}
			results[t.name] = append(results[t.name], res)
			rows[t.name] = rowOf(res, latency)
			rig.withMem(rows, true)
			c.printLatencyLine(out, t.name, rows)
			if c.MaxRPS && t.name == "fleet" {
				if err := fleetAdmit(ctx, out, c, rig, res); err != nil {
					return nil, err
				}
			}
		}
	}
	return results, nil
}

// beginRound heads round's tables and, with Tracing, gives the
// gateways round's roles.
func (c OverheadConfig) beginRound(ctx context.Context, out io.Writer, rig *overheadRig, round int) error {
	if c.Rounds > 1 {
		fmt.Fprintf(out, "round %d of %d:\n", round, c.Rounds)
	}
	if rig.trace == nil {
		return nil
	}
	return rig.trace.begin(ctx, out, rig, round)
}

// load is what loadgen sends to t.
func (t overheadTarget) load() loadgen.Target {
	plain, stream := t.requests()
	return loadgen.Target{URLs: t.urls, Header: t.header, Body: []byte(plain), StreamBody: []byte(stream)}
}

// loadConfig is the load c asks for, for one target or, interleaved, for
// them all (its Target left for the caller).
func (c OverheadConfig) loadConfig() loadgen.Config {
	cfg := loadgen.Config{
		Duration:       c.Duration,
		Warmup:         c.Warmup,
		StreamFraction: c.Stream,
		ChunkStamps:    c.Stream > 0,
	}
	if c.MaxRPS {
		cfg.MaxInFlight = c.Connections
	} else {
		cfg.Rate, cfg.MaxInFlight = c.Rate, c.Concurrency
	}
	return cfg
}

// drive runs one measured load at t: warm-up, then the measured window.
func (c OverheadConfig) drive(ctx context.Context, t overheadTarget, round int) (loadgen.Result, error) {
	cfg := c.loadConfig()
	cfg.Target = t.load()
	stop := func() {}
	if round == 1 {
		var err error
		if stop, err = c.profile(t, &cfg); err != nil {
			return loadgen.Result{}, err
		}
	}
	// The CPU time of the processes serving t, other than this one,
	// counts in its cost.
	var before time.Duration
	if len(t.procs) > 0 {
		onMeasure := cfg.OnMeasure
		cfg.OnMeasure = func() {
			if onMeasure != nil {
				onMeasure()
			}
			before = procsCPU(t.procs)
		}
	}
	if t.watch != nil {
		unwatch, err := startWatcher(ctx, t.watch, t.consoleURL)
		if err != nil {
			stop()
			return loadgen.Result{}, fmt.Errorf("%s: %w", t.name, err)
		}
		defer unwatch()
	}
	var (
		res loadgen.Result
		err error
	)
	labelled(ctx, "loadgen", func(ctx context.Context) { res, err = loadgen.Run(ctx, cfg) })
	stop()
	t.mem.sample(t.procs)
	if len(t.procs) > 0 {
		res.Process.CPU += procsCPU(t.procs) - before
	}
	if err != nil {
		return res, fmt.Errorf("%s: %w", t.name, err)
	}
	return res, nil
}
