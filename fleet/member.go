package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
)

// MemberConfig configures one replica's membership of a fleet.
type MemberConfig struct {
	// Replica is the replica's stable id (required).
	Replica string
	// Listen is the address of the fleet listener, where the other
	// replicas reach this one while it leads (required; port 0 picks
	// one). Advertise is the address they dial; default Listen's.
	Listen    string
	Advertise string
	// Secret is shared by the fleet's replicas (required).
	Secret string
	// TermTTL and HeartbeatTimeout: see CoordConfig. The heartbeat
	// timeout is also the session timeout (Config.SessionTimeout).
	TermTTL          time.Duration
	HeartbeatTimeout time.Duration
	// Poll is the elector's safety-net poll (ElectorConfig.Poll).
	Poll time.Duration
	// Options are the leader's engine's.
	Options admission.Options
	// OnLead: see Config.OnLead.
	OnLead func(term admission.Engine, epoch uint64)
	// Clock runs the elector; default clock.Real.
	Clock  clock.Clock
	Logger *slog.Logger
}

// Member is one replica of a fleet: it takes part in the election, keeps
// itself registered and alive, and gives its engine the terms as they
// change. While it leads, it also forgets the replicas whose heartbeats
// have lapsed, so that one that comes back finds itself fenced.
type Member struct {
	cfg     MemberConfig
	pool    *pgxpool.Pool
	ln      net.Listener
	coord   *Coordinator
	elector *Elector
	engine  *Engine
	log     *slog.Logger

	mu   sync.Mutex
	term Term
}

// NewMember opens the fleet listener and prepares the replica; Run
// starts it. The engine may be handed to the gateway at once: its calls
// wait for the first leader (Config.Unavailable).
func NewMember(ctx context.Context, pool *pgxpool.Pool, cfg MemberConfig) (*Member, error) {
	if cfg.Secret == "" {
		return nil, errors.New("fleet: a secret is required, shared by the fleet's replicas")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("fleet listener: %w", err)
	}
	addr := cfg.Advertise
	if addr == "" {
		addr = ln.Addr().String()
	}
	coord, err := NewCoordinator(pool, CoordConfig{Replica: cfg.Replica, Addr: addr, TermTTL: cfg.TermTTL,
		HeartbeatTimeout: cfg.HeartbeatTimeout, Clock: cfg.Clock, Logger: cfg.Logger})
	if err != nil {
		ln.Close()
		return nil, err
	}
	elector, err := NewElector(coord, ElectorConfig{Poll: cfg.Poll})
	if err != nil {
		ln.Close()
		return nil, err
	}
	m := &Member{cfg: cfg, pool: pool, ln: ln, coord: coord, elector: elector, log: cfg.Logger}
	// A call waits for a leader through a failover: the term running out,
	// a campaign, and the new leader's wait for the replicas to sync.
	unavailable := coord.cfg.TermTTL + 2*coord.cfg.HeartbeatTimeout
	m.engine = New(Config{Replica: cfg.Replica, Secret: cfg.Secret, SessionTimeout: coord.cfg.HeartbeatTimeout,
		Unavailable: unavailable,
		Valid: func(epoch uint64) bool {
			e, ok := elector.Leading()
			return ok && e == epoch
		},
		Options: cfg.Options, Logger: cfg.Logger, OnLead: cfg.OnLead})
	return m, nil
}

// Engine is the replica's admission engine.
func (m *Member) Engine() *Engine { return m.engine }

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

// Run migrates the fleet's tables, serves the listener, and follows the
// election until ctx ends (nil) or the replica is fenced (ErrFenced: it
// must stop, for the fleet has given away what it held). The engine is
// closed when Run returns.
func (m *Member) Run(ctx context.Context) error {
	defer m.engine.Close()
	defer m.ln.Close()
	if err := Migrate(ctx, m.pool); err != nil {
		return err
	}
	go func() { _ = m.engine.Serve(m.ln) }()
	errc := make(chan error, 1)
	go func() { errc <- m.elector.Run(ctx) }()
	first := true
	forget := time.NewTicker(m.coord.cfg.HeartbeatTimeout / 2)
	defer forget.Stop()
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
				live = m.live(ctx)
			}
			if t.Leader != "" {
				m.log.Info("fleet term", "epoch", t.Epoch, "leader", t.Leader, "leading", leading)
				m.engine.SetTerm(t, leading, live)
			}
		case <-forget.C:
			m.forgetLapsed(ctx)
		}
	}
}

// live lists the replicas alive now, for a new leader to wait for.
func (m *Member) live(ctx context.Context) []string {
	rs, err := m.coord.Live(ctx)
	if err != nil {
		m.log.Warn("fleet: could not list live replicas; the new leader waits the session timeout", "error", err)
		return nil
	}
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

// forgetLapsed removes, while this replica leads, the registrations of
// replicas whose heartbeats lapsed: if one comes back (it was paused, or
// cut off), its next heartbeat finds it fenced and it stops. Its leases
// are already back: the leader dropped it when its session had been gone
// for the same timeout.
func (m *Member) forgetLapsed(ctx context.Context) {
	epoch, ok := m.elector.Leading()
	if !ok {
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
		}
	}
}
