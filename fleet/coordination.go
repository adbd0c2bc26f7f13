package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// The coordination the fleet needs of the database its replicas share,
// declared here and implemented by the store: package postgres in
// production, an in-memory fake in this package's tests. Package
// coordtest is the conformance suite both pass. The interfaces are split
// by role: Coordinator uses Registry, Election, Liveness and Secrets;
// an Elector also TermListener; a Board only NodeBoard.
//
// Who decides. The store keeps one term: an epoch, the leader's replica
// id, address and generation, and an expiry. A campaign takes the term
// only once it has expired, or at once from an earlier registration of
// its own replica id (a leader generation below its own: the process
// that held it restarted, and a replica id runs once), or — a take-over —
// from a leader whose life session is gone; it raises the epoch by one.
// Of any number of concurrent campaigners exactly one takes a term, and
// the others see the winner's. The leader extends its term with a
// renewal, which succeeds only while the term is still its own and
// unexpired; a term that lapsed, even if no one took it, is never
// revived: leading again means a new epoch, so one epoch is one unbroken
// leadership.
//
// How a deposed leader's late write is refused. A TTL alone admits two
// holders: a leader paused past its term still believes it leads when it
// resumes. So every write a leader makes on the fleet's behalf carries its
// epoch and is checked against the term in the same step: ReplicaForget
// does this itself, and the task store's transactions do it through the
// store's own fence (postgres.DB.TermFenceTx). A write checked under
// epoch N completes before epoch N+1 can begin, or is refused.
//
// Who is alive. Each replica registers with a new generation and
// heartbeats every HeartbeatTimeout/3. A replica whose heartbeat is older than the heartbeat
// timeout by the store's clock has lapsed; the leader forgets it (fenced
// by the leader's epoch, and refused if the replica heartbeated
// meanwhile) and only then releases what it held. A forgotten replica,
// or one superseded by a newer registration of its id, gets ErrFenced on
// its next heartbeat and must stop. Generations only grow, across
// restarts and forgetting alike.
//
// A replica's life session is held for as long as its process lives
// (LifeHold), and ends as soon as the process does; a paused or cut-off
// process keeps it. It is one half of the proof that a replica died (see
// the package documentation).
//
// How terms are found. Each new epoch and each resignation is announced
// to the listeners (TermListen); a term that simply runs out announces
// nothing, so followers also campaign when the term they last read is due
// to expire, and a poll is the safety net.
//
// The clocks. Every comparison of times — expiry, heartbeat age, a board
// offer's age — is made by the store with its own clock (PostgreSQL's
// now()), never with a replica's wall clock. Locally an Elector uses the
// injected clock.Clock (monotonic in production) only for its own timers
// and for one deadline: it holds the leadership only while Now() < (when
// the last successful renew or campaign was sent) + TermTTL − Margin. The
// send time comes before the store's now in that call, so the local
// deadline falls before the store's expiry as long as the two clocks run
// at about the same rate; Margin covers the difference and the time a
// caller takes to act on Leading(). A process paused past its term
// (SIGSTOP, a long GC pause, a frozen VM) sees on resume that the
// deadline has passed before it does anything. Network timeouts on
// single calls use context deadlines.

// Coordination is everything a replica's Coordinator and Elector need of
// the store.
type Coordination interface {
	Registry
	Election
	Liveness
	Secrets
	TermListener
}

// Registry is the replicas' registrations.
type Registry interface {
	// ReplicaRegister records replica p.ID with a generation newer than
	// any its id had, and a heartbeat now, and returns the generation. A
	// concurrent registration of the same id that got a newer generation
	// wins; this one then gets ErrFenced.
	ReplicaRegister(ctx context.Context, p *ReplicaRegisterParams) (uint64, error)
	// ReplicaHeartbeat marks replica id at generation gen alive now.
	// ErrFenced means its registration is gone or has another generation.
	ReplicaHeartbeat(ctx context.Context, id string, gen uint64) error
	// ReplicaLeave removes the registration of id at generation gen; one
	// of another generation, or none, is left alone.
	ReplicaLeave(ctx context.Context, id string, gen uint64) error
}

// ReplicaRegisterParams are ReplicaRegister's.
type ReplicaRegisterParams struct {
	ID      string
	Addr    string // the replica's fleet listener
	Workers int    // its task worker count
	// CatalogVersion is the catalog version the replica serves as it
	// registers (CoordConfig.CatalogVersion), recorded with the
	// registration in one step; 0: none. A registration that supersedes
	// an older one of the same id keeps the greater of the two.
	CatalogVersion int64
}

// Election is the term.
type Election interface {
	// TermCampaign takes the term for p.Replica, until the store's now
	// plus p.TTL, if it has expired, or if its leader is p.Replica at a
	// generation below p.Gen, or — with p.TakeOver — if it is of epoch
	// p.Epoch and led by a generation (not 0) whose life session is not
	// held. It reports whether it took it, and returns the term taken,
	// or else the term as it is (then unexpired, someone else's or
	// p.Replica's own still running). A won campaign is announced to the
	// listeners. It waits for the writes fenced under the current epoch.
	TermCampaign(ctx context.Context, p *TermCampaignParams) (Term, bool, error)
	// TermRenew extends p.Leader's term of p.Epoch until the store's now
	// plus p.TTL and reports true, or reports false when that epoch is
	// not the current term, not p.Leader's, or has expired. A renewal is
	// not announced.
	TermRenew(ctx context.Context, p *TermRenewParams) (bool, error)
	// TermResign ends leader's term of epoch now, and announces it; a term
	// that is another's, or has ended, is left alone.
	TermResign(ctx context.Context, epoch uint64, leader string) error
	// TermGet reads the term; before the first campaign it is epoch 0,
	// ended.
	TermGet(ctx context.Context) (Term, error)
}

// TermCampaignParams are TermCampaign's.
type TermCampaignParams struct {
	Replica string
	Addr    string // published as the term's while Replica leads
	// Gen is the campaigner's registration, 0 if it has none.
	Gen uint64
	TTL time.Duration
	// TakeOver, with Epoch, also takes the term of Epoch before it
	// expires if its leader's life session is not held.
	TakeOver bool
	Epoch    uint64
}

// TermRenewParams are TermRenew's.
type TermRenewParams struct {
	Epoch  uint64
	Leader string
	TTL    time.Duration
}

// Liveness is who is alive, by the store's clock and by life sessions.
type Liveness interface {
	// ReplicaList returns the registered replicas by id: those whose last
	// heartbeat is within p.Timeout of the store's now, or with p.Lapsed
	// those whose heartbeat is p.Timeout old or more.
	ReplicaList(ctx context.Context, p *ReplicaListParams) ([]Replica, error)
	// ReplicaForget deletes the registration of replica p.ID at
	// generation p.Gen on behalf of p.Leader, leading p.Epoch, and reports
	// whether it did. It refuses — false, nothing changed — when p.Epoch
	// is no longer the current unexpired term led by p.Leader, when the
	// replica heartbeated within p.Timeout, or when its registration has
	// another generation.
	ReplicaForget(ctx context.Context, p *ReplicaForgetParams) (bool, error)
	// LifeHold holds the life session of replica id at generation gen
	// until ctx ends, then lets it go and returns nil. The session is
	// lost with the process that holds it (or with its connection to the
	// store, which LifeHold makes again at once). It waits while an
	// earlier session of the same generation that the store has not yet
	// seen end still holds it.
	LifeHold(ctx context.Context, id string, gen uint64) error
	// LifeGet reports what the store knows of replica id at generation
	// gen: its fleet listener's address while it is registered at that
	// generation (empty once it is not), and whether its life session is
	// held.
	LifeGet(ctx context.Context, id string, gen uint64) (Life, error)
}

// ReplicaListParams are ReplicaList's.
type ReplicaListParams struct {
	Timeout time.Duration // the heartbeat timeout
	Lapsed  bool
}

// ReplicaForgetParams are ReplicaForget's.
type ReplicaForgetParams struct {
	Epoch   uint64
	Leader  string
	ID      string
	Gen     uint64
	Timeout time.Duration // the heartbeat timeout
}

// Life is what the store knows of one replica's process.
type Life struct {
	Addr string // its fleet listener while registered; empty once not
	Held bool   // its life session is held
}

// Secrets is the fleet's shared secret.
type Secrets interface {
	// SecretEnsure returns the fleet's secret, keeping candidate as it
	// first if there is none yet. Concurrent first calls agree on one.
	SecretEnsure(ctx context.Context, candidate string) (string, error)
}

// TermListener carries the term's announcements.
type TermListener interface {
	// TermListen calls f with the epoch of each term announced (a won
	// campaign, a resignation) until ctx ends, then returns nil. After it
	// begins listening, and again whenever it listens afresh (its
	// connection to the store was made again), it calls f(0): what was
	// announced meanwhile is lost, and the term must be read in full.
	// f(0) is also for an announcement that names no epoch. f is called
	// for one announcement at a time, in order, and must not block. An
	// error wrapping ErrNoListen means announcements cannot reach this
	// process through the store's connection.
	TermListen(ctx context.Context, f func(epoch uint64)) error
}

// ErrNoListen means a notification sent to this replica's own listening
// connection never arrived: the DSN most likely leads through a PgBouncer
// in transaction or statement pooling mode, which hands each statement to
// whichever server connection is free and silently loses LISTEN.
var ErrNoListen = errors.New("fleet: LISTEN receives no notifications on a connection of this DSN " +
	"(a PgBouncer in transaction or statement pooling mode loses them): " +
	"give the fleet a direct PostgreSQL DSN, or a session-pooled one")

// NodeBoard is where each replica publishes what its edge nodes serve
// (Board).
type NodeBoard interface {
	// BoardPublish writes p.Replica's offer, stamped with the store's now,
	// replacing the one it had.
	BoardPublish(ctx context.Context, p *BoardPublishParams) error
	// BoardLeave removes replica's offer.
	BoardLeave(ctx context.Context, replica string) error
	// BoardRead returns the offers, by replica, of every replica but
	// p.Except younger than p.TTL by the store's clock.
	BoardRead(ctx context.Context, p *BoardReadParams) ([]BoardOffer, error)
}

// BoardPublishParams are BoardPublish's.
type BoardPublishParams struct {
	Replica string
	Addr    string
	// Served and Nodes are JSON documents, kept as JSON (not necessarily
	// byte for byte).
	Served json.RawMessage
	Nodes  json.RawMessage
}

// BoardReadParams are BoardRead's.
type BoardReadParams struct {
	Except string
	TTL    time.Duration
}

// BoardOffer is one replica's offer as read.
type BoardOffer struct {
	Replica string
	Addr    string
	Served  json.RawMessage
	Nodes   json.RawMessage
	// Age is how long ago it was published, by the store's clock.
	Age time.Duration
}
