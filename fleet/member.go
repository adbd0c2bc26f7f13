package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/internal/lifecycle"
)

// MemberConfig configures one replica's membership of a fleet.
type MemberConfig struct {
	// Replica is the replica's stable id (required).
	Replica string
	// Listen is the address of the fleet listener, where the other
	// replicas reach this one while it leads (required; port 0 picks
	// one). Advertise is the address they dial; default the listener's,
	// or this host's name and its port when it listens on every
	// interface.
	Listen    string
	Advertise string
	// Secret is shared by the fleet's replicas; empty: the one the
	// database keeps (Coordinator.Secret).
	Secret string
	// Workers is this replica's task worker count (CoordConfig.Workers).
	Workers int
	// CatalogVersion is the catalog version this replica serves,
	// recorded as it registers (CoordConfig.CatalogVersion). Default nil.
	CatalogVersion func() int64
	// TermTTL and HeartbeatTimeout: see CoordConfig. The heartbeat
	// timeout is also the session timeout (Config.SessionTimeout).
	TermTTL          time.Duration
	HeartbeatTimeout time.Duration
	// Poll is the elector's safety-net poll (ElectorConfig.Poll).
	Poll time.Duration
	// Options are the leader's engine's.
	Options admission.Options
	// LazyRelease: see Config.LazyRelease.
	LazyRelease bool
	// ReleaseSilent: see Config.ReleaseSilent. Default ReleaseAtBound.
	ReleaseSilent ReleasePolicy
	// Clock runs the elector; default clock.Real.
	Clock  clock.Clock
	Logger *slog.Logger
	// Dropped: see Config.Dropped.
	Dropped func(op string)
}

// Member is one replica of a fleet: it takes part in the election, keeps
// itself registered and alive, and gives its engine the terms as they
// change. While it leads, it also forgets the replicas whose heartbeats
// have lapsed, so that one that comes back finds itself fenced. What it
// leads it publishes (Subscribe): the term's durable engine, the live
// replicas' workers, the replicas it forgot.
type Member struct {
	cfg     MemberConfig
	ln      net.Listener
	coord   *Coordinator
	elector *Elector
	engine  *Engine
	log     *slog.Logger
	feed    admission.LeadFeed
	loop    lifecycle.Loop // Start's Run

	mu      sync.Mutex
	term    Term
	workers int // the live replicas' workers, as last read while leading

	// Owned by Run's goroutine: the epoch this replica leads and since
	// when, by its clock.
	ledEpoch uint64
	ledSince time.Time

	probe      *prober
	takingOver atomic.Bool    // a leaderLost probe is under way
	lost       sync.WaitGroup // leaderLost's probes, which Run joins
}

// NewMember opens the fleet listener and prepares the replica, on the
// store the replicas share (postgres.DB, whose Open migrated its schema);
// Run starts it. The engine may be handed to the gateway at once: its
// calls wait for the first leader (Config.Unavailable).
func NewMember(ctx context.Context, store Coordination, cfg MemberConfig) (*Member, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	if store == nil {
		return nil, errors.New("fleet: nil coordination store")
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("fleet listener: %w", err)
	}
	addr := cfg.Advertise
	if addr == "" {
		addr = advertised(ln.Addr())
	}
	coord, err := NewCoordinator(store, CoordConfig{Replica: cfg.Replica, Addr: addr, Workers: cfg.Workers, CatalogVersion: cfg.CatalogVersion,
		TermTTL: cfg.TermTTL, HeartbeatTimeout: cfg.HeartbeatTimeout, Clock: cfg.Clock, Logger: cfg.Logger})
	if err != nil {
		ln.Close()
		return nil, err
	}
	if cfg.Secret == "" {
		if cfg.Secret, err = coord.Secret(ctx); err != nil {
			ln.Close()
			return nil, err
		}
	}
	elector, err := NewElector(coord, ElectorConfig{Poll: cfg.Poll})
	if err != nil {
		ln.Close()
		return nil, err
	}
	m := &Member{cfg: cfg, ln: ln, coord: coord, elector: elector, log: cfg.Logger, probe: newProber(coord.cfg.HeartbeatTimeout)}
	onLead := func(term admission.Engine, epoch uint64) {
		if term == nil {
			m.feed.Publish(admission.LeadEvent{Kind: admission.TermEnded})
			return
		}
		// Run reads the live replicas' workers before it gives the engine
		// the term that began.
		m.feed.Publish(admission.LeadEvent{Kind: admission.TermBegan, Engine: term, Epoch: epoch, Workers: m.workersNow()})
	}
	// A call waits for a leader through a failover: the term running out,
	// a campaign, and the new leader's wait for the replicas to sync.
	unavailable := coord.cfg.TermTTL + 2*coord.cfg.HeartbeatTimeout
	m.engine = New(Config{Replica: cfg.Replica, Secret: cfg.Secret, SessionTimeout: coord.cfg.HeartbeatTimeout,
		Unavailable: unavailable,
		Valid: func(epoch uint64) bool {
			e, ok := elector.Leading()
			return ok && e == epoch
		},
		Options: cfg.Options, Logger: cfg.Logger, Dropped: cfg.Dropped, OnLead: onLead, LazyRelease: cfg.LazyRelease,
		ReleaseSilent: cfg.ReleaseSilent, Dead: m.dead, OnLeaderLost: m.leaderLost})
	return m, nil
}

// advertised is the address the other replicas dial when none is
// configured: the listener's, or this host's name with its port when it
// listens on every interface.
func advertised(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok || !ta.IP.IsUnspecified() {
		return a.String()
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		return a.String()
	}
	return net.JoinHostPort(host, strconv.Itoa(ta.Port))
}

// Engine is the replica's admission engine.
func (m *Member) Engine() *Engine { return m.engine }

// Replica is this replica's id.
func (m *Member) Replica() string { return m.cfg.Replica }

// Secret is the fleet's shared secret (MemberConfig.Secret, or the one
// the database keeps): what else the replicas say to each other, such as
// relayed runs, is authenticated by it too.
func (m *Member) Secret() string { return m.cfg.Secret }

// Ready waits until the replica's engine has synced with a leader.
func (m *Member) Ready(ctx context.Context) error { return m.engine.Ready(ctx) }

// Addr is the fleet listener's address.
func (m *Member) Addr() string { return m.ln.Addr().String() }

// Term reports the newest term this replica knows of, and whether it
// leads it.
func (m *Member) Term() (Term, bool) {
	m.mu.Lock()
	t := m.term
	m.mu.Unlock()
	e, ok := m.elector.Leading()
	return t, ok && e == t.Epoch
}

// Subscribe follows what this replica leads (admission.Leadership): the
// durable engine of each term it leads, the live replicas' workers, the
// replicas it forgot.
func (m *Member) Subscribe() (<-chan admission.LeadEvent, func()) { return m.feed.Subscribe() }

// Replicas lists the live replicas (a heartbeat within the heartbeat
// timeout), by id, as the store has them.
func (m *Member) Replicas(ctx context.Context) ([]Replica, error) { return m.coord.Live(ctx) }

// Start runs the member (Run) until Stop. If it ends on its own — the
// fleet fenced this replica — Done is closed and Err says why: the
// process must not go on serving.
func (m *Member) Start(context.Context) error {
	m.loop.Go(m.Run)
	return nil
}

// Stop ends Start's Run: it resigns a term it leads, and the others stop
// counting this replica as alive at once.
func (m *Member) Stop(ctx context.Context) error { return m.loop.Stop(ctx) }

// Discard lets go of what NewMember took — the fleet listener, the
// engine — when Start never ran (a part started before it failed); once
// Start ran, Stop does that, and Discard does nothing.
func (m *Member) Discard() error {
	if m.loop.Done() != nil {
		return nil
	}
	m.engine.Close()
	if err := m.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// Done is closed when Start's Run has returned; see Err.
func (m *Member) Done() <-chan struct{} { return m.loop.Done() }

// Err is why Start's Run ended on its own (ErrFenced), once Done is
// closed; nil if Stop ended it.
func (m *Member) Err() error { return m.loop.Err() }

// Run serves the listener and follows the election until ctx ends (nil)
// or the replica is fenced (ErrFenced: it must stop, for the fleet has
// given away what it held). The engine is closed when Run returns.
func (m *Member) Run(ctx context.Context) error {
	// The engine closes before the listener (its Close closes it last):
	// a listener that refuses connections is proof that this replica
	// grants nothing more (leaderLost). Then what Run started is joined.
	defer m.ln.Close()
	serving := make(chan struct{})
	defer func() { <-serving }()
	defer m.lost.Wait()
	defer m.engine.Close()
	go func() {
		defer close(serving)
		_ = m.engine.Serve(m.ln)
	}()
	errc := make(chan error, 1)
	go func() { errc <- m.elector.Run(ctx) }()
	first := true
	every := m.coord.cfg.HeartbeatTimeout / 2
	tick, t := clock.After(m.cfg.Clock, every)
	defer func() { t.Stop() }()
	for {
		select {
		case t, ok := <-m.elector.Changes():
			if !ok {
				return <-errc
			}
			if first {
				// The elector registered before it reported a term.
				m.engine.cfg.Gen = m.coord.Gen()
				first = false
			}
			m.mu.Lock()
			m.term = t
			m.mu.Unlock()
			epoch, leading := m.elector.Leading()
			leading = leading && epoch == t.Epoch
			var live []string
			if leading {
				var workers int
				live, workers = m.live(ctx)
				m.setWorkers(workers)
				if m.ledEpoch != t.Epoch {
					m.ledEpoch, m.ledSince = t.Epoch, m.cfg.Clock.Now()
				}
			}
			if !leading {
				m.countReplicas(ctx)
			}
			if t.Leader != "" {
				m.log.Info("fleet term", "epoch", t.Epoch, "leader", t.Leader, "leading", leading)
				m.engine.SetTerm(t, leading, live)
			}
		case <-tick:
			m.lead(ctx)
			m.countReplicas(ctx)
			tick, t = clock.After(m.cfg.Clock, every)
		}
	}
}

func (m *Member) workersNow() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.workers
}

// setWorkers records the live replicas' workers and reports whether the
// sum changed.
func (m *Member) setWorkers(n int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	changed := m.workers != n
	m.workers = n
	return changed
}

// countReplicas gives the engine the fleet's size, which divides the
// limits of the scopes that fail open while no leader answers. When
// PostgreSQL does not answer, the engine keeps the last.
func (m *Member) countReplicas(ctx context.Context) {
	if rs, err := m.coord.Live(ctx); err == nil {
		m.engine.SetReplicas(len(rs))
	}
}

// live lists the replicas alive now, for a new leader to wait for, and
// the sum of their workers.
func (m *Member) live(ctx context.Context) ([]string, int) {
	rs, err := m.coord.Live(ctx)
	if err != nil {
		m.log.Warn("fleet: could not list live replicas; the new leader waits the session timeout", "error", err)
		return nil, 0
	}
	out := make([]string, 0, len(rs))
	workers := 0
	for _, r := range rs {
		if !r.Session && r.ID != m.cfg.Replica && m.probe.refused(ctx, r.Addr) {
			// Its process died: it will never sync, and holds nothing.
			continue
		}
		out = append(out, r.ID)
		workers += r.Workers
	}
	return out, workers
}

// dead reports whether the process of replica at generation gen is
// proven dead (Config.Dead): PostgreSQL holds no life session of it
// (its backend ended), and either its registration is gone or its fleet
// listener refuses connections (the kernel closed it). A paused or
// cut-off process keeps both; a live one whose PostgreSQL connection
// alone was ended keeps its listener.
func (m *Member) dead(ctx context.Context, replica string, gen uint64) bool {
	ctx, cancel := context.WithTimeout(ctx, m.coord.cfg.HeartbeatTimeout)
	defer cancel()
	addr, held, err := m.coord.Life(ctx, replica, gen)
	if err != nil || held {
		return false
	}
	return addr == "" || m.probe.refused(ctx, addr)
}

// leaderLost is the engine's word that its session with t's leader was
// closed from the leader's side, or refused (Config.OnLeaderLost). If
// the leader's fleet listener refuses connections — its process died,
// or it stopped leading and closed its engine first — the elector takes
// the term at once, should PostgreSQL confirm that the leader's life
// session is gone too (Coordinator.TakeOver); otherwise nothing
// changes, and a leader merely paused or cut off is fenced by its term.
func (m *Member) leaderLost(t Term) {
	if t.Leader == m.cfg.Replica || !m.takingOver.CompareAndSwap(false, true) {
		return
	}
	m.lost.Go(func() {
		defer m.takingOver.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), m.coord.cfg.HeartbeatTimeout)
		defer cancel()
		if m.probe.refused(ctx, t.Addr) {
			m.log.Warn("fleet: the leader's listener refuses connections; taking the term if its PostgreSQL session is gone too", "epoch", t.Epoch, "leader", t.Leader)
			m.elector.TakeOver(t.Epoch)
		}
	})
}

// prober dials replicas' fleet listeners to learn whether one is closed.
type prober struct {
	timeout time.Duration
}

func newProber(heartbeat time.Duration) *prober {
	return &prober{timeout: min(heartbeat, time.Second)}
}

// refused reports whether a connection to addr is refused: its host
// says nothing listens there. A paused process's listener still
// accepts (its kernel does), and an unreachable one times out.
func (p *prober) refused(ctx context.Context, addr string) bool {
	if addr == "" {
		return false
	}
	d := net.Dialer{Timeout: p.timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		c.Close()
		return false
	}
	return refused(err)
}

// lead does a leader's periodic work: it forgets the replicas whose
// heartbeats lapsed and follows the live replicas' workers.
func (m *Member) lead(ctx context.Context) {
	epoch, ok := m.elector.Leading()
	if !ok || epoch != m.ledEpoch {
		return
	}
	m.forgetLapsed(ctx, epoch)
	if _, workers := m.live(ctx); workers > 0 && m.setWorkers(workers) {
		m.feed.Publish(admission.LeadEvent{Kind: admission.WorkersChanged, Workers: workers})
	}
}

// forgetLapsed removes, while this replica leads epoch, the
// registrations of replicas whose heartbeats lapsed: if one comes back
// (it was paused, or cut off), its next heartbeat finds it fenced and it
// stops. Its leases are already back: the leader dropped it when its
// session had been gone for the same timeout. A new leader first waits a
// heartbeat timeout of its own: after PostgreSQL was unreachable for
// longer than the timeout, every replica's heartbeat is old, and the
// live ones need that time to heartbeat again.
func (m *Member) forgetLapsed(ctx context.Context, epoch uint64) {
	if m.cfg.Clock.Now().Sub(m.ledSince) < m.coord.cfg.HeartbeatTimeout {
		return
	}
	lapsed, err := m.coord.Lapsed(ctx)
	if err != nil {
		return
	}
	for _, r := range lapsed {
		if r.ID == m.cfg.Replica {
			continue
		}
		if done, err := m.coord.Forget(ctx, epoch, r.ID, r.Gen); err == nil && done {
			m.log.Warn("fleet: a replica's heartbeats lapsed; it is fenced", "replica", r.ID, "gen", r.Gen, "heartbeat_age", r.HeartbeatAge)
			m.feed.Publish(admission.LeadEvent{Kind: admission.ReplicaForgotten, Replica: r.ID})
		}
	}
}
