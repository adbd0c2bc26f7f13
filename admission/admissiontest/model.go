package admissiontest

// Model runs random operation sequences against an engine and checks every
// step against a reference model (model_state.go, whose comment lists what
// is checked). The operations are in model_ops.go, the checks after each
// step in model_check.go, and the model's side of the engine's events and
// notifications in model_events.go.
//
// A failure names the seed (or the fuzz input) and the operation, and lists
// the last operations and events. A seed replays the same operations as long
// as the engine decides the same way; the engine iterates maps when it
// fences and activates, so a replay after one of those may diverge.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
)

var modelStart = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// modelScopes are the scopes every run starts with: small limits, so that
// waiters contend, and one of each feature.
var modelScopes = []struct {
	name string
	cfg  admission.ScopeConfig
}{
	{"global", admission.ScopeConfig{Limit: 6}},
	{"tenant:a", admission.ScopeConfig{Limit: 2, RoundRobin: true}},
	{"tenant:b", admission.ScopeConfig{Limit: 3, FairnessWindow: 20 * time.Second}},
	{"pm:x", admission.ScopeConfig{Limit: 2}},
	{"pm:y", admission.ScopeConfig{Limit: 2, FairnessWindow: 10 * time.Second, RoundRobin: true}},
	{"pm:rpm", admission.ScopeConfig{Limit: 3, RPM: 6}},
	{"pm:tpm", admission.ScopeConfig{TPM: 600, RPM: 30}},
	{"pm:q", admission.ScopeConfig{Limit: 1, QueueLimit: 2}},
	{"pm:ttl", admission.ScopeConfig{Limit: 2, LeaseTTL: 30 * time.Second}},
	{"pm:wait", admission.ScopeConfig{Limit: 1, MaxWait: 40 * time.Second}},
	{"node:n1", admission.ScopeConfig{Limit: 2, Owner: "n1", OwnerGen: 1, LeaseTTL: 20 * time.Second}},
	{"node:n2", admission.ScopeConfig{Limit: 1, Owner: "n2", OwnerGen: 1, RoundRobin: true}},
}

// modelOwners hold leases; n1 and n2 also own their node scopes.
var modelOwners = []string{"r1", "n1", "n2"}

// resolveScopes are what Resolve answers with: no queue limit, whose
// effect on a waiter that changes candidates the contract leaves open.
// pm:wait's MaxWait counts from the waiter's arrival, also for candidates
// it gets later.
var resolveScopes = []string{"global", "tenant:a", "tenant:b", "pm:x", "pm:y", "pm:rpm", "pm:tpm", "pm:ttl", "pm:wait", "node:n1", "node:n2"}

var allScopes = func() []string {
	var out []string
	for _, s := range modelScopes {
		out = append(out, s.name)
	}
	return out
}()

// ModelConfig configures a run of Model or ModelInput.
type ModelConfig struct {
	// Ops is how many operations Model runs in all, split over its seeds
	// (a tenth of them under -short). Default 100,000.
	Ops int
	// Seeds is how many seeds Model splits its operations over, each a
	// parallel subtest. Default 8.
	Seeds int
	// Seed, when not zero, makes Model run this seed only, with its share
	// of Ops.
	Seed uint64
	// Lenient makes the model follow the engine where it deviates from the
	// contract in known ways (see model.lenient), so that a long run can
	// look for other problems. Default off.
	Lenient bool
	// Rerun is the command that runs the test again, for failure reports.
	// Model appends the flags that replay the failing seed, named
	// -<FlagPrefix>.seed, .ops, .seeds and .lenient; ModelInput reports
	// Rerun as it is. Default: none, and the seed alone is named.
	Rerun      string
	FlagPrefix string
	// PositionScan, when set, is an independent way to compute a queued
	// waiter's Position (the memory engine's scan of its scope): every
	// Position the model asks for is compared with it. Default none.
	PositionScan func(e admission.Engine, waiterID string) (admission.Position, error)
}

// Model runs cfg.Ops random operations against engines built by newEngine,
// split over cfg.Seeds seeds, each seed a parallel subtest with an engine,
// a fake clock and a reference model of its own.
func Model(t *testing.T, newEngine NewEngine, cfg ModelConfig) {
	t.Helper()
	if cfg.Ops <= 0 {
		cfg.Ops = 100_000
	}
	if cfg.Seeds <= 0 {
		cfg.Seeds = 8
	}
	ops, seeds := cfg.Ops, cfg.Seeds
	if testing.Short() {
		ops /= 10
	}
	per := max(ops/seeds, 1)
	run := func(seed uint64) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			repro := fmt.Sprintf("%s (seed %d)", cfg.Rerun, seed)
			if p := cfg.FlagPrefix; p != "" {
				repro = fmt.Sprintf("%s -%s.seed=%d -%s.ops=%d -%s.seeds=%d", cfg.Rerun, p, seed, p, ops, p, seeds)
				if cfg.Lenient {
					repro += " -" + p + ".lenient"
				}
			}
			r := newRunner(t, newEngine, cfg, fmt.Sprintf("seed %d", seed), repro, randChooser{rand.New(rand.NewPCG(seed, 0x5eed))})
			r.run(per)
		})
	}
	if cfg.Seed != 0 {
		run(cfg.Seed)
		return
	}
	for seed := range uint64(seeds) {
		run(seed + 1)
	}
}

// ModelInput runs the model once against an engine built by newEngine,
// reading every choice from data until it runs dry: the body of a fuzz
// target. Failures tend to need a few thousand operations, and an
// operation takes 5–30 bytes.
func ModelInput(t *testing.T, newEngine NewEngine, data []byte, cfg ModelConfig) {
	t.Helper()
	r := newRunner(t, newEngine, cfg, "fuzz input", cfg.Rerun, &byteChooser{data: data})
	r.run(math.MaxInt)
}

// chooser is where a run's choices come from: a seeded generator, or fuzz
// bytes.
type chooser interface {
	intn(n int) int // in [0, n)
	done() bool
}

type randChooser struct{ r *rand.Rand }

func (c randChooser) intn(n int) int {
	if n <= 1 {
		return 0
	}
	return c.r.IntN(n)
}

func (randChooser) done() bool { return false }

// byteChooser reads one byte per choice (two when n > 256); past the end
// every choice is 0 and done reports true.
type byteChooser struct {
	data []byte
	pos  int
}

func (c *byteChooser) intn(n int) int {
	if n <= 1 {
		return 0
	}
	v := 0
	for span := 1; span < n; span <<= 8 {
		if c.pos >= len(c.data) {
			return 0
		}
		v = v<<8 | int(c.data[c.pos])
		c.pos++
	}
	return v % n
}

func (c *byteChooser) done() bool { return c.pos >= len(c.data) }

// runner drives one engine and its model.
type runner struct {
	tb     testing.TB
	name   string
	repro  string
	ctx    context.Context
	clk    *clock.Fake
	eng    admission.Engine
	scan   func(e admission.Engine, waiterID string) (admission.Position, error) // nil: no oracle for Position
	m      *model
	src    chooser
	step   int
	ops    ring
	held   map[string]int64 // ScopeStats.Held after the last step
	nextID int
}

func newRunner(t *testing.T, newEngine NewEngine, cfg ModelConfig, name, repro string, src chooser) *runner {
	t.Helper()
	clk := clock.NewFake(modelStart)
	m := newModel(clk)
	m.lenient = cfg.Lenient
	m.lenientFlag = "ModelConfig.Lenient"
	if cfg.FlagPrefix != "" {
		m.lenientFlag = "-" + cfg.FlagPrefix + ".lenient"
	}
	eng := newEngine(t, admission.Options{Clock: clk, Observer: m})
	if eng == nil {
		t.Fatal("newEngine returned nil")
	}
	r := &runner{
		tb: t, name: name, repro: repro, ctx: context.Background(), clk: clk, eng: eng, scan: cfg.PositionScan,
		m: m, src: src, ops: ring{max: 30}, held: make(map[string]int64),
	}
	for _, o := range modelOwners {
		m.owners[o] = &modelOwner{gen: 1}
	}
	for _, s := range modelScopes {
		m.addScope(s.name, s.cfg)
		if err := r.eng.SetScope(r.ctx, s.name, s.cfg); err != nil {
			t.Fatalf("SetScope(%s): %v", s.name, err)
		}
	}
	r.check()
	return r
}

func (r *runner) fatalf(format string, args ...any) {
	r.tb.Helper()
	r.tb.Fatalf("%s, operation %d: %s\nreproduce: %s\nlast operations:\n%slast events:\n%s",
		r.name, r.step, fmt.Sprintf(format, args...), r.repro, r.ops.String(), r.m.events.String())
}

func (r *runner) logf(format string, args ...any) {
	r.ops.add(fmt.Sprintf("%d @%s: ", r.step, r.clk.Now().Sub(modelStart)) + fmt.Sprintf(format, args...))
}

// begin marks the operation in progress; end clears it and says how many
// events it caused.
func (r *runner) begin(o op) {
	o.step = r.step
	r.m.mu.Lock()
	r.m.op = o
	r.m.mu.Unlock()
}

func (r *runner) endLocked() int {
	n := r.m.op.events
	r.m.op = op{}
	return n
}

func (r *runner) end() int {
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	return r.endLocked()
}

// run performs n operations (or until the chooser runs dry), checking after
// each, then winds everything down and checks the engine is empty.
func (r *runner) run(n int) {
	for r.step = 0; r.step < n && !r.src.done(); r.step++ {
		r.do()
		r.check()
	}
	r.quiesce()
}

type weightedOp struct {
	weight int
	do     func(*runner)
}

var modelOps = []weightedOp{
	{30, (*runner).opEnqueue},
	{4, (*runner).opTryAcquire},
	{1, (*runner).opDuplicate},
	{1, (*runner).opUnknownScope},
	{6, (*runner).opCancel},
	{2, (*runner).opPosition},
	{16, (*runner).opAdvance},
	{11, (*runner).opRelease},
	{2, (*runner).opReleaseAgain},
	{2, (*runner).opReleaseStale},
	{5, (*runner).opRenew},
	{1, (*runner).opRenewStale},
	{3, (*runner).opReconcile},
	{1, (*runner).opFence},
	{1, (*runner).opActivate},
	{5, (*runner).opSetScope},
}

var modelOpsTotal = func() int {
	n := 0
	for _, o := range modelOps {
		n += o.weight
	}
	return n
}()

func (r *runner) do() {
	r.m.mu.Lock()
	crowded := len(r.m.queuedWaiters()) > 64
	r.m.mu.Unlock()
	if crowded {
		r.opCancel()
		return
	}
	k := r.src.intn(modelOpsTotal)
	for _, o := range modelOps {
		if k < o.weight {
			o.do(r)
			return
		}
		k -= o.weight
	}
}
