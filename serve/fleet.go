package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/fleet"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/httpapi"
	"github.com/weir-gateway/weir/metrics"
)

// joinFleet makes this serve a replica of the fleet on the PostgreSQL
// store the replicas share: its admission engine is the fleet's, and its
// task service follows what it leads (fleet.Member.Subscribe).
func (m *Main) joinFleet(ctx context.Context, db fleet.Coordination, opts admission.Options) (*fleet.Member, error) {
	cfg := m.Config.Fleet
	replica := cfg.Replica
	if replica == "" {
		replica = defaultReplica(m.Config.Server.Listen)
	}
	member, err := fleet.NewMember(ctx, db, fleet.MemberConfig{
		Replica:   replica,
		Listen:    m.Config.FleetListen(),
		Advertise: cfg.Advertise,
		Secret:    cfg.Secret,
		Workers:   m.Config.Tasks.Workers,
		// The catalog version the gateway serves is recorded with the
		// registration: the gateway part's start took it before the
		// fleet part starts, so the scopes a version published once
		// this replica is registered left wait for it to take that
		// version too (fleetCatalog.retireLocked).
		CatalogVersion: m.catalogServed,
		// The gateway's requests hold ownerless leases and release them
		// as their upstream calls end: a follower need not wait for the
		// leader to take each release.
		LazyRelease:      true,
		ReleaseSilent:    releaseSilent(cfg.ReleaseSilent),
		TermTTL:          cfg.TermTTL,
		HeartbeatTimeout: cfg.HeartbeatTimeout,
		Poll:             cfg.Poll,
		Options:          opts,
		Logger:           m.Logger,
		Dropped:          m.Metrics.DroppedError,
	})
	if err != nil {
		return nil, fmt.Errorf("join the fleet: %w", err)
	}
	return member, nil
}

// catalogServed is the fleet's catalog version this replica serves: 0
// on SQLite, for a Config built in code, and before its first take.
func (m *Main) catalogServed() int64 {
	if m.catalog == nil {
		return 0
	}
	return m.catalog.State().Version
}

// releaseSilent is the fleet's policy for fleet.release_silent.
func releaseSilent(v string) fleet.ReleasePolicy {
	if v == config.ReleaseSilentHeartbeat {
		return fleet.ReleaseAtTimeout
	}
	return fleet.ReleaseAtBound
}

// defaultReplica names a replica that the config does not: this host and
// the port it serves on, stable across restarts (so a restart supersedes
// the replica's previous run) and distinct between serves on one host. A
// port chosen at random (0) gets a random name.
func defaultReplica(listen string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "weir"
	}
	_, port, err := net.SplitHostPort(listen)
	if err != nil || port == "" || port == "0" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		port = hex.EncodeToString(b)
	}
	return host + "-" + port
}

// pingBound bounds /readyz's check that PostgreSQL answers.
const pingBound = time.Second

// fleetReady is /readyz's answer on a fleet: ready while PostgreSQL
// answers and this replica has synced with a leader, or while it runs
// open (no leader answers, and it admits its share of the scopes that
// fail open: taking it out of rotation would fail those too). A replica
// that cannot speak its leader's protocol is not ready, open or not: it
// is of another build than the fleet can run beside it, and it says so.
func (m *Main) fleetReady() error {
	if p := m.Member.Engine().Protocol(); p.Refused != "" {
		return fmt.Errorf("fleet protocol: %s", p.Refused)
	}
	if open, _ := m.Member.Engine().Open(); open {
		return nil
	}
	if !m.synced() {
		return errors.New("not synced with a fleet leader: admissions would fail with store_unavailable")
	}
	ctx, cancel := context.WithTimeout(context.Background(), pingBound)
	defer cancel()
	if err := m.DB.Fleet.Ping(ctx); err != nil {
		return fmt.Errorf("PostgreSQL does not answer: admissions fail with store_unavailable: %w", err)
	}
	return nil
}

// readyNotes are /readyz's lines beyond "ready": the catalog's drift.
// A replica that drifted stays ready: it serves the fleet's catalog,
// which is what every other replica serves.
func (m *Main) readyNotes() []string {
	if m.catalog == nil {
		return nil
	}
	st := m.catalog.State()
	if !st.Drift {
		return nil
	}
	return []string{fmt.Sprintf("catalog drift: this replica serves the fleet's catalog version %d (%s), not its config file's (%s)",
		st.Version, short(st.Hash), short(st.FileHash))}
}

// synced reports whether this replica has synced with a fleet leader.
func (m *Main) synced() bool {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Ready answers at once when synced
	return m.Member.Ready(ctx) == nil
}

// fleetView is the fleet as this replica sees it, for /admin/queues.
func (m *Main) fleetView(ctx context.Context) *httpapi.FleetView {
	t, leading := m.Member.Term()
	v := &httpapi.FleetView{Replica: m.Member.Replica(), Epoch: t.Epoch, Leader: t.Leader, Leading: leading,
		Synced: m.synced(), Replicas: []httpapi.ReplicaView{}}
	if m.catalog != nil {
		st := m.catalog.State()
		v.Catalog = &httpapi.CatalogView{Version: st.Version, Hash: st.Hash, FileHash: st.FileHash, Drift: st.Drift}
	}
	p := m.Member.Engine().Protocol()
	v.Protocol = &httpapi.ProtocolView{Version: p.Version, Min: p.Min, Max: p.Max, Refused: p.Refused}
	ctx, cancel := context.WithTimeout(ctx, pingBound)
	defer cancel()
	rs, err := m.Member.Replicas(ctx)
	if err != nil {
		v.Error = err.Error()
		return v
	}
	for _, r := range rs {
		v.Replicas = append(v.Replicas, httpapi.ReplicaView{ID: r.ID, Gen: r.Gen, Workers: r.Workers,
			HeartbeatAgeMs: r.HeartbeatAge.Milliseconds()})
	}
	return v
}

// fleetState is the fleet's state for the metrics.
func (m *Main) fleetState() metrics.FleetState {
	t, leading := m.Member.Term()
	open, admitted := m.Member.Engine().Open()
	p := m.Member.Engine().Protocol()
	return metrics.FleetState{Epoch: t.Epoch, Leading: leading, Synced: m.synced(), Open: open, OpenAdmitted: admitted,
		Protocol: p.Version, ProtocolRefused: p.Refused != "", ProtocolRefusals: p.Refusals}
}

// affinity shares the gateway's cache-affinity table with the fleet's
// other replicas, through the leader; nil on one process.
func (m *Main) affinity() gateway.AffinityShare {
	if m.Member == nil {
		return nil
	}
	return fleetAffinity{m.Member.Engine()}
}

// leaderPlansNewKinds is gateway.Deps.LeaderPlansNewKinds: in a fleet,
// whether this replica's session with its leader is of a protocol whose
// leaders plan the newer task kinds. Between sessions (version 0) it
// says yes: the task is stored, and the next leader is most likely of
// the newer build.
func (m *Main) leaderPlansNewKinds() func() bool {
	if m.Member == nil {
		return nil
	}
	e := m.Member.Engine()
	return func() bool {
		v := e.Protocol().Version
		return v == 0 || v >= fleet.ProtocolTaskKinds
	}
}

// fleetAffinity is gateway.AffinityShare over the fleet's sessions.
type fleetAffinity struct{ e *fleet.Engine }

func (a fleetAffinity) ShareAffinity(key, target string) {
	a.e.ShareAffinity([]fleet.AffinityEntry{{Key: key, Target: target}})
}

func (a fleetAffinity) OnAffinity(f func(key, target string)) {
	a.e.OnAffinity(func(entries []fleet.AffinityEntry) {
		for _, e := range entries {
			f(e.Key, e.Target)
		}
	})
}
