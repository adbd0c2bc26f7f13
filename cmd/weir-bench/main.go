// Command weir-bench is Weir's benchmark harness: the scenarios of
// docs/benchmarks.md (package bench), given their flags here.
//
//	weir-bench [flags]                   the gateway's overhead against a plain proxy
//	weir-bench sync-waiters [flags]      the memory a waiting synchronous request costs
//	weir-bench tasks drain|restart       durable tasks: drain time, restart time
//	weir-bench idle [flags]              the CPU an idle 'weir serve' uses
//
// It is a binary of its own so that weir links neither the harness, its
// load generator nor its pgbench runner. It starts the gateway in its own
// process as `weir serve` assembles it (package serve), and runs the weir
// binary for the scenarios that need `weir serve` as a child process
// (--weir; see findWeir).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/weir-gateway/weir/bench"
	"github.com/weir-gateway/weir/gcfloor"
	"github.com/weir-gateway/weir/internal/sigprof"
)

func main() {
	if err := rootCmd().Execute(); err != nil {
		os.Exit(1)
	}
}

// rootCmd is weir-bench: the overhead scenario, with the others as its
// subcommands and --weir for them all.
func rootCmd() *cobra.Command {
	h := &harness{}
	cmd := benchCmd(h)
	cmd.PersistentFlags().StringVar(&h.weirPath, "weir", "", "the weir binary that the scenarios run as 'weir serve' children (default: the weir beside this binary, else one built with go build from the checkout in the current directory; never one on PATH)")
	cmd.AddCommand(benchWaitersCmd(h), benchWaitersFloorCmd(), benchProxyCmd(), benchTasksCmd(h), benchIdleCmd(h))
	return cmd
}

func benchCmd(h *harness) *cobra.Command {
	var c bench.OverheadConfig
	cmd := &cobra.Command{
		Use:   "weir-bench",
		Short: "Measure Weir's added latency against the mock provider and a plain reverse proxy",
		Long: `Start the mock provider, a plain httputil.ReverseProxy in front of it and
Weir (three scopes per request, limits that never block) in this process,
drive each in turn at the same fixed rate (open loop; latency from each
request's scheduled time), and print per target the rate achieved, success,
latency percentiles and the latency added over direct, with Weir's added
latency as a multiple of the proxy's. --max-rps drives a closed loop instead
and reports sustained throughput. See docs/benchmarks.md for the scenarios
and 'go doc ./bench Overhead' for every column. The subcommands are the
other scenarios.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true, // a failing run prints its error, not its usage
		RunE: func(cmd *cobra.Command, args []string) error {
			w, cleanup, err := h.weir(cmd, c.Fleet.Replicas > 0 || c.OutOfProcess)
			if err != nil {
				return err
			}
			defer cleanup()
			c.Weir = w
			if c.Tracing {
				if err := tracingEnv(cmd.ErrOrStderr(), os.Getenv); err != nil {
					return err
				}
			}
			c.HeapFloorSet = cmd.Flags().Changed("heap-floor")
			// In process, the gateway runs here as weir serve would: with
			// its heap floor. Out of process, this process runs only the
			// load generator and the mock, with a floor of its own.
			floor := c.HeapFloor
			if c.OutOfProcess {
				floor = bench.HarnessHeapFloor
			}
			defer gcfloor.Start(floor, nil)()
			return bench.Overhead(cmd.Context(), cmd.OutOrStdout(), c)
		},
	}
	f := cmd.Flags()
	f.Float64Var(&c.Rate, "rate", 2000, "requests per second, open loop")
	f.DurationVar(&c.Duration, "duration", 20*time.Second, "measured time per target")
	f.DurationVar(&c.Warmup, "warmup", 10*time.Second, "warm-up per target, left out of the figures")
	f.IntVar(&c.Rounds, "rounds", 1, "drive the targets (in turn, or with --interleave together) this many times and add a table of medians")
	f.Float64Var(&c.Stream, "stream", 0, "fraction of requests that stream (20 chunks 5 ms apart)")
	f.IntVar(&c.Concurrency, "concurrency", 256, "most requests in flight at once, open loop")
	f.BoolVar(&c.MaxRPS, "max-rps", false, "closed loop: sustained throughput with --connections workers")
	f.IntVar(&c.Connections, "connections", 64, "closed-loop workers for --max-rps")
	f.IntVar(&c.CompletionTokens, "completion-tokens", 80, "tokens in a non-streamed answer (80 make about 1 KB)")
	f.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of one target's measured phase (first round) to this file")
	f.StringVar(&c.MemProfile, "memprofile", "", "write the allocations of the same phase to this file, and those before it to this file plus .base (go tool pprof -sample_index=alloc_space -base FILE.base weir-bench FILE)")
	f.StringVar(&c.Trace, "trace", "", "write an execution trace of one target's measured phase to this file (keep --duration short)")
	f.StringVar(&c.ProfileTarget, "profile-target", "weir", "target whose measured phase --cpuprofile, --memprofile and --trace cover: direct, proxy, weir, (with --edge) edge, (with --dialects) responses or messages, (with --budgets) budgets, or (with --tracing) weir+trace or weir'; with --out-of-process, proxy or weir are profiled in their child process (--cpuprofile and --trace only; a --weir binary must take them)")
	f.Int64Var(&c.HeapFloor, "heap-floor", gcfloor.Default, "the gateway's heap floor in bytes, as weir serve's server.heap_floor (0: none): this process's, or with --out-of-process the weir child's (default there: its config's default)")
	f.BoolVar(&c.OutOfProcess, "out-of-process", false, "run targets proxy and weir each as a child process (the plain proxy; 'weir serve' on SQLite), so that each one's CPU time and memory are its own; direct, the load generator and the mock stay in this process")
	f.IntVar(&c.Ports, "ports", bench.DefaultPorts, "the first loopback port the listeners take in turn (mock, proxy, weir, edge), each the next free one, below the ephemeral range the load generator's connections use; 0: ports the kernel picks")
	f.StringSliceVar(&c.ConsoleWatcher, "console-watcher", nil, "also drive target console: the same gateway while this command watches its web console (WEIR_URL; it prints \"watching\" once live), e.g. node,e2e/browser/watch.mjs")
	f.BoolVar(&c.Dialects, "dialects", false, "also drive targets responses and messages: the same gateway and model through OpenAI's Responses API and Anthropic's Messages API, translated to Chat Completions and back (judged against weir)")
	f.BoolVar(&c.Budgets, "budgets", false, "also drive target budgets: the same gateway and platform model (priced) through a key of another group asking another model, where that key, group and model each have a hard budget never reached, so each request reserves and settles its cost in three budget scopes (budget-overhead; judged against weir)")
	f.BoolVar(&c.Interleave, "interleave", false, "with --dialects, --budgets or --tracing: drive direct, proxy, weir and their targets together on one open loop at --rate, each request to the next target of a shuffled turn (each target an equal share of --rate), so all are measured over the same seconds and the ratios to weir hold steady on a noisy machine; the cost table then comes from a pass of each target alone after the rounds")
	f.BoolVar(&c.Tracing, "tracing", false, "also drive targets weir+trace, a gateway like weir's tracing every request (100% sampled) by OTLP/HTTP to a receiver in this process, and weir', another untraced one: weir, weir+trace and weir' are three gateways built alike, restarted every round with the roles turned (trace-overhead: weir+trace judged against weir, weir'/weir the A/A beside it; --rounds a multiple of 3)")
	f.BoolVar(&c.Edge, "edge", false, "also drive target edge: the same gateway tunnelling each request over gRPC to an edge node agent (in this process) whose provider is the same mock (edge-overhead; with --stream, edge-stream)")
	fleetFlags(f, &c.Fleet, "also drive one 'weir serve' on SQLite (target serve) and this many replicas on PostgreSQL (target fleet), each as a child process; with --max-rps, pgbench follows the fleet's loop (fleet-admit)")
	return cmd
}

func benchTasksCmd(h *harness) *cobra.Command {
	var c bench.TasksConfig
	cmd := &cobra.Command{
		Use:   "tasks drain|restart",
		Short: "Benchmark durable tasks: drain time against the ideal, restart time with a long queue",
		Long: `Benchmark durable tasks against a real 'weir serve' child process and the
mock provider's video API (docs/benchmarks.md's "drain" and "restart" scenarios).
See 'go doc ./bench Drain' and 'go doc ./bench Restart'.`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"drain", "restart"},
		RunE: func(cmd *cobra.Command, args []string) error {
			w, cleanup, err := h.weir(cmd, true)
			if err != nil {
				return err
			}
			defer cleanup()
			c.Weir = w
			ctx := cmd.Context()
			switch args[0] {
			case "drain":
				return bench.Drain(ctx, cmd.OutOrStdout(), c)
			case "restart":
				if !cmd.Flags().Changed("tasks") {
					c.Tasks = 100_000
				}
				return bench.Restart(ctx, cmd.OutOrStdout(), c)
			}
			return fmt.Errorf("tasks: unknown scenario %q: want drain or restart", args[0])
		},
	}
	f := cmd.Flags()
	f.IntVar(&c.Tasks, "tasks", 10_000, "tasks to submit (restart: default 100,000)")
	f.IntVar(&c.Capacity, "capacity", 100, "drain: worker capacity (tasks.workers)")
	f.DurationVar(&c.Job, "job", 2*time.Second, "drain: how long each upstream job runs")
	f.DurationVar(&c.PollMin, "poll-min", 250*time.Millisecond, "tasks.poll_min")
	f.DurationVar(&c.PollMax, "poll-max", 10*time.Second, "tasks.poll_max")
	f.IntVar(&c.Connections, "connections", 16, "connections submitting tasks")
	f.StringVar(&c.Dir, "dir", "", "directory for the config and database (default: a new temporary one, removed after)")
	f.StringVar(&c.Fill, "fill", "http", "restart: how the queue is filled: http (each task through the task API) or store (the first through the API, the rest written into the stopped gateway's SQLite file in batches: for 10^6)")
	fleetFlags(f, &c.Fleet, "run the gateway as this many replicas on PostgreSQL instead of one on SQLite, tasks submitted to each in turn (restart kills and restarts them all)")
	return cmd
}

func benchIdleCmd(h *harness) *cobra.Command {
	var c bench.IdleConfig
	cmd := &cobra.Command{
		Use:   "idle",
		Short: "Measure the CPU an idle 'weir serve' uses, against 0.2% of a core",
		Long: `Start 'weir serve' as a child process (on a new SQLite file, or with
--fleet 1 as one replica on PostgreSQL) in front of the mock provider, let it
settle, send it nothing for --duration, and print the CPU it used per 10 s,
as a share of a core against the goal of 0.2%, and its threads' context
switches per second. Linux only. See 'go doc ./bench Idle'.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			w, cleanup, err := h.weir(cmd, true)
			if err != nil {
				return err
			}
			defer cleanup()
			c.Weir = w
			return bench.Idle(cmd.Context(), cmd.OutOrStdout(), c)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&c.Duration, "duration", time.Minute, "measured window")
	f.DurationVar(&c.Settle, "settle", 15*time.Second, "time left alone after the gateway serves, before the window (longer than the 5 s after which River's idle client stops)")
	fleetFlags(f, &c.Fleet, "1: run the gateway as one fleet replica on PostgreSQL instead of alone on SQLite")
	return cmd
}

// fleetFlags are --fleet and --dsn, into c.
func fleetFlags(f *pflag.FlagSet, c *bench.FleetConfig, usage string) {
	f.IntVar(&c.Replicas, "fleet", 0, usage)
	f.StringVar(&c.DSN, "dsn", bench.DefaultDSN(), "with --fleet: the PostgreSQL server (env WEIR_TEST_POSTGRES_DSN); each run makes a schema of its own there and drops it after")
}

func benchWaitersCmd(h *harness) *cobra.Command {
	var c bench.SyncWaitersConfig
	cmd := &cobra.Command{
		Use:   "sync-waiters",
		Short: "Measure the memory a waiting synchronous request costs, against a bare net/http floor",
		Long: `Send --requests chat requests at once, one connection each, to a platform
model with concurrency --limit in front of the mock provider (--latency per
answer), first to a bare net/http server that decodes the body and waits on
a semaphore (the floor), then to 'weir serve', each in its own process, and
print each process's idle and peak RSS, the share of one waiting request,
and whether all were served in order at exactly the limit.
See 'go doc ./bench SyncWaiters'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w, cleanup, err := h.weir(cmd, true)
			if err != nil {
				return err
			}
			defer cleanup()
			c.Weir = w
			c.HeapFloorSet = cmd.Flags().Changed("heap-floor")
			return bench.SyncWaiters(cmd.Context(), cmd.OutOrStdout(), c)
		},
	}
	f := cmd.Flags()
	f.IntVar(&c.Requests, "requests", 10_000, "requests sent at once, each on its own connection")
	f.IntVar(&c.Limit, "limit", 10, "the platform model's concurrency limit (and the floor's semaphore)")
	f.DurationVar(&c.Latency, "latency", 100*time.Millisecond, "the mock's time to answer")
	f.Float64Var(&c.Rate, "rate", 0, "requests sent per second (0: as fast as the client opens connections)")
	f.DurationVar(&c.Timeout, "timeout", 10*time.Minute, "bound on each target's run")
	f.StringSliceVar(&c.Targets, "targets", []string{"floor", "weir"}, "targets to measure, in order")
	f.StringVar(&c.Dir, "dir", "", "directory for weir's config and database (default: a new temporary one, removed after)")
	f.Int64Var(&c.HeapFloor, "heap-floor", 0, "weir's server.heap_floor in bytes, 0 for none (default: its config's default)")
	return cmd
}

// benchWaitersFloorCmd is sync-waiters' floor server, run as a child:
// hidden, since it is only the benchmark's yardstick.
func benchWaitersFloorCmd() *cobra.Command {
	var c bench.FloorConfig
	cmd := yardstickCmd("sync-waiters-floor", "The bare net/http server sync-waiters measures weir against",
		&c.Listen, &c.Upstream, "the mock's chat completions URL", func(ctx context.Context) error { return bench.ServeFloor(ctx, c) })
	cmd.Flags().IntVar(&c.Limit, "limit", 10, "requests proxied at once")
	return cmd
}

// benchProxyCmd is the overhead scenario's plain proxy, run as a child
// under --out-of-process: hidden, since it is only the benchmark's
// yardstick.
func benchProxyCmd() *cobra.Command {
	var c bench.ProxyConfig
	var cpuProfile, traceFile string
	cmd := yardstickCmd("overhead-proxy", "The plain reverse proxy weir-bench --out-of-process measures weir against",
		&c.Listen, &c.Upstream, "the mock's base URL", func(ctx context.Context) error {
			stop := sigprof.Start(cpuProfile, traceFile)
			err := bench.ServeProxy(ctx, c)
			return errors.Join(err, stop())
		})
	// As weir serve's: a profile taken from SIGUSR1 to SIGUSR2.
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile taken from SIGUSR1 to SIGUSR2 to this file")
	cmd.Flags().StringVar(&traceFile, "trace", "", "write an execution trace taken from SIGUSR1 to SIGUSR2 to this file")
	return cmd
}

// yardstickCmd is a hidden child command that serves a benchmark's
// yardstick on --listen in front of --upstream until SIGTERM.
func yardstickCmd(use, short string, listen, upstream *string, upstreamHelp string, serve func(context.Context) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:    use,
		Short:  short,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE:   func(cmd *cobra.Command, _ []string) error { return serve(cmd.Context()) },
	}
	cmd.Flags().StringVar(listen, "listen", "127.0.0.1:0", "address to listen on")
	cmd.Flags().StringVar(upstream, "upstream", "", upstreamHelp)
	return cmd
}
