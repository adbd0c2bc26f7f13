package loadgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Target is what every request of a run sends.
type Target struct {
	// Method of the requests. Default POST when Body is set, else GET.
	Method string
	// URL of the requests. Required, unless URLs is set.
	URL string
	// URLs, when set, replace URL: the requests go to each in turn, the
	// i-th request (in order of schedule, or of sending in a closed loop)
	// to URLs[i % len(URLs)], as a round-robin load balancer in front of
	// several replicas would send them. Default none.
	URLs []string
	// Header sent with every request. Default none.
	Header http.Header
	// Body of the non-streaming requests. Default empty.
	Body []byte
	// StreamBody is the body of the requests Config.StreamFraction picks.
	// Default Body.
	StreamBody []byte
}

// Config is one run.
type Config struct {
	// Target is what to send. Required by Run; RunInterleaved takes its
	// targets apart and leaves it unused.
	Target Target
	// Rate is the open loop's requests per second. Default 0: a closed
	// loop, MaxInFlight workers sending back to back.
	Rate float64
	// Duration is how long the measured part of the run lasts. Required.
	Duration time.Duration
	// Warmup is how long the run goes before it starts measuring; its
	// requests are sent but left out of the figures. Default 0.
	Warmup time.Duration
	// MaxInFlight bounds the requests in flight at once (the closed loop's
	// worker count). An open-loop request that finds the bound reached
	// waits for a slot, and its wait counts in its latency. Default 256.
	MaxInFlight int
	// StreamFraction is the fraction of requests, spread evenly, that send
	// Target.StreamBody. Default 0.
	StreamFraction float64
	// ChunkStamps says that the streamed answers carry stamps, lines
	// AppendStamp made as their chunks were sent: each stamp read is a
	// sample of Result.Chunk, from its time to the return of the read
	// that completed its line. The sender's clock must be Clock (in a
	// benchmark, the wall clock of the same machine). Default false.
	ChunkStamps bool
	// Timeout bounds one request, from its send to its last byte.
	// Default 30s.
	Timeout time.Duration
	// LateAfter is how far behind its due time a request may go out and
	// still count as on time. Default 5ms: Go timers on Linux wake about a
	// millisecond late, so a smaller bound would count the generator's own
	// timer granularity rather than a stall.
	LateAfter time.Duration
	// Client sends the requests. Default NewClient(MaxInFlight).
	Client *http.Client
	// Clock is the time source. Default the wall clock.
	Clock Clock
	// OnMeasure, if set, is called once when the measured part begins (by
	// the generator, before it sends the first measured request): a hook
	// for starting a profile.
	OnMeasure func()
}

// defaults fills in t's method and stream body.
func (t *Target) defaults() {
	if t.Method == "" {
		t.Method = http.MethodGet
		if len(t.Body) > 0 {
			t.Method = http.MethodPost
		}
	}
	if t.StreamBody == nil {
		t.StreamBody = t.Body
	}
}

func (t *Target) validate() error {
	switch {
	case t.URL == "" && len(t.URLs) == 0:
		return errors.New("loadgen: no target URL")
	case slices.Contains(t.URLs, ""):
		return errors.New("loadgen: an empty URL in Target.URLs")
	}
	return nil
}

func (c *Config) defaults() {
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 256
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.LateAfter <= 0 {
		c.LateAfter = 5 * time.Millisecond
	}
	if c.Client == nil {
		c.Client = NewClient(c.MaxInFlight)
	}
	if c.Clock == nil {
		c.Clock = wallClock{}
	}
}

func (c *Config) validate() error {
	switch {
	case c.Duration <= 0:
		return errors.New("loadgen: duration must be positive")
	case c.Rate < 0:
		return errors.New("loadgen: rate must not be negative")
	case c.Warmup < 0:
		return errors.New("loadgen: warm-up must not be negative")
	case !(c.StreamFraction >= 0 && c.StreamFraction <= 1):
		return errors.New("loadgen: stream fraction must be in [0, 1]")
	}
	return nil
}

// NewClient returns a client for load: keep-alive connections, as many idle
// ones kept per host as may be in flight (the default of 2 would make a busy
// run dial a new connection for most requests), no compression, no proxy,
// no HTTP/2.
func NewClient(maxInFlight int) *http.Client {
	return &http.Client{Transport: NewTransport(maxInFlight)}
}

// NewTransport is NewClient's transport, for a reverse proxy under test to
// use the same settings.
func NewTransport(maxConns int) *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        maxConns,
		MaxIdleConnsPerHost: maxConns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
}

// sample is one request's record. Times are offsets from the run's start.
type sample struct {
	due, sent, firstByte, done time.Duration
	target, seq                int // its target's index in the run, and its number among that target's requests
	stream, ok, used           bool
	failure                    string
	chunks                     []time.Duration // with ChunkStamps: each stamp's latency
}

// Run drives cfg.Target as cfg says and returns what it measured. It
// returns early, with the figures so far and ctx's error, when ctx ends.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.Target.validate(); err != nil {
		return Result{}, err
	}
	res, err := run(ctx, cfg, []Target{cfg.Target})
	if len(res) == 0 {
		return Result{}, err
	}
	return res[0], err
}

// run drives targets as cfg says and returns a Result for each; more than
// one target needs an open loop.
func run(ctx context.Context, cfg Config, targets []Target) ([]Result, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	targets = slices.Clone(targets)
	for i := range targets {
		targets[i].defaults()
	}
	g := &generator{cfg: cfg, targets: targets, start: cfg.Clock.Now()}
	if cfg.Rate > 0 {
		return g.open(ctx)
	}
	res, err := g.closed(ctx)
	return []Result{res}, err
}

type generator struct {
	cfg     Config
	targets []Target // the closed loop's is targets[0]
	start   time.Time
	counted ProcessStats // the process's counters when measuring began
	began   bool
}

// measuring marks the start of the measured window: it reads the
// process's counters and calls the OnMeasure hook.
func (g *generator) measuring() {
	if g.cfg.OnMeasure != nil {
		g.cfg.OnMeasure()
	}
	g.counted, g.began = processSnapshot(), true
}

// spent is what the process spent since measuring began.
func (g *generator) spent() ProcessStats {
	if !g.began {
		return ProcessStats{}
	}
	return processSnapshot().sub(g.counted)
}

func (g *generator) since() time.Duration { return g.cfg.Clock.Now().Sub(g.start) }

// open sends on the fixed schedule: each request from its own goroutine,
// at most MaxInFlight at once, to the targets in turns (see turns). With
// several targets the warm-up and the measured window hold whole turns,
// so that each target has as many measured requests as the others.
func (g *generator) open(ctx context.Context) ([]Result, error) {
	sch := Schedule{Start: g.start, Rate: g.cfg.Rate}
	n := len(g.targets)
	first := wholeTurns(sch.Count(g.cfg.Warmup), n)
	total := first + wholeTurns(max(0, sch.Count(g.cfg.Warmup+g.cfg.Duration)-first), n)
	samples := make([]sample, total)
	slots := make(chan struct{}, g.cfg.MaxInFlight)
	var wg sync.WaitGroup
	deal := newTurns(n)
	seqs, blocked := make([]int, n), make([]int, n)
	var err error
send:
	for i := range total {
		due := sch.Offset(i)
		if err = g.cfg.Clock.SleepUntil(ctx, g.start.Add(due)); err != nil {
			break
		}
		if i == first {
			g.measuring()
		}
		target := deal.next()
		select {
		case slots <- struct{}{}:
		default:
			if i >= first {
				blocked[target]++
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				err = ctx.Err()
				break send
			}
		}
		s := &samples[i]
		s.due, s.target, s.seq, s.used = due, target, seqs[target], true
		s.stream = streams(s.seq, g.cfg.StreamFraction)
		seqs[target]++
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.do(ctx, s)
			<-slots
		}()
	}
	wg.Wait()
	results, spent := g.summarizeEach(samples[first:]), g.spent()
	for t := range results {
		r := &results[t]
		r.Open, r.Rate, r.Blocked, r.Process = true, g.cfg.Rate/float64(n), blocked[t], spent
	}
	return results, err
}

// closed runs MaxInFlight workers, each sending its next request when the
// previous one has ended, until the warm-up and the measured window are
// over.
func (g *generator) closed(ctx context.Context) (Result, error) {
	measureFrom := g.cfg.Warmup
	end := g.cfg.Warmup + g.cfg.Duration
	var (
		next    atomic.Int64 // request sequence, for StreamFraction
		measure sync.Once
		mu      sync.Mutex
		all     []sample
		wg      sync.WaitGroup
	)
	for range g.cfg.MaxInFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []sample
			for ctx.Err() == nil {
				now := g.since()
				if now >= end {
					break
				}
				if now >= measureFrom {
					measure.Do(g.measuring)
				}
				seq := int(next.Add(1) - 1)
				s := sample{due: now, seq: seq, stream: streams(seq, g.cfg.StreamFraction), used: true}
				g.do(ctx, &s)
				if s.due >= measureFrom {
					mine = append(mine, s)
				}
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res := g.summarize(all)
	res.Process = g.spent()
	return res, ctx.Err()
}

// bufs hold the buffers bodies are read into and thrown away.
var bufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// do sends the request s stands for and records it in s.
func (g *generator) do(ctx context.Context, s *sample) {
	s.sent = g.since()
	defer func() { s.done = g.since() }()
	ctx, cancel := context.WithTimeout(ctx, g.cfg.Timeout)
	defer cancel()
	t := &g.targets[s.target]
	body := t.Body
	if s.stream {
		body = t.StreamBody
	}
	url := t.URL
	if len(t.URLs) > 0 {
		url = t.URLs[s.seq%len(t.URLs)]
	}
	req, err := http.NewRequestWithContext(ctx, t.Method, url, bytes.NewReader(body))
	if err != nil {
		s.failure = "build request: " + err.Error()
		return
	}
	if t.Header != nil {
		req.Header = t.Header.Clone()
	}
	resp, err := g.cfg.Client.Do(req)
	if err != nil {
		s.failure = "send: " + reason(err)
		return
	}
	defer resp.Body.Close()
	bp := bufs.Get().(*[]byte)
	defer bufs.Put(bp)
	buf := *bp
	var stamps *stampReader
	if s.stream && g.cfg.ChunkStamps {
		stamps = &stampReader{}
	}
	for gotByte := false; ; {
		n, err := resp.Body.Read(buf)
		if n > 0 && !gotByte {
			s.firstByte, gotByte = g.since(), true
		}
		if n > 0 && stamps != nil {
			stamps.read(buf[:n], g.cfg.Clock.Now())
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			s.failure = "read body: " + reason(err)
			return
		}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		s.failure = fmt.Sprintf("HTTP %d", resp.StatusCode)
		return
	}
	s.ok = true
	if stamps != nil {
		s.chunks = stamps.latencies
	}
}
