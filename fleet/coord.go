package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/weir-gateway/weir/clock"
)

// ErrFenced means this replica's registration is gone or was superseded by
// a newer generation of the same id: it must stop acting as that replica.
var ErrFenced = errors.New("fleet: replica fenced: its registration is gone or superseded")

// ErrNotRegistered means Heartbeat was called before Register.
var ErrNotRegistered = errors.New("fleet: replica not registered")

// Term is one leadership: the epoch, who holds it and where it is reached.
type Term struct {
	Epoch  uint64
	Leader string // replica id; empty before the first term
	Addr   string // the leader's fleet listener
	// Left is how long the term had to run when it was read, by the
	// store's clock; zero once it has expired or was resigned, when
	// no one leads until a campaign takes Epoch+1.
	Left time.Duration
}

// Replica is one registered replica.
type Replica struct {
	ID  string
	Gen uint64
	// Addr is where the replica's fleet listener is reached.
	Addr string
	// Workers is the replica's task worker count (CoordConfig.Workers).
	Workers int
	// HeartbeatAge is how old its last heartbeat was when read, by the
	// store's clock.
	HeartbeatAge time.Duration
	// Session says whether the store holds the replica's life session
	// (HoldLife): false once the process that registered is gone, or
	// while its connection to the store is being made again.
	Session bool
}

// CoordConfig configures a Coordinator.
type CoordConfig struct {
	// Replica is this replica's stable id (required; at most 200 bytes of
	// UTF-8, no NUL). A restarted process keeps its id and gets a newer
	// generation.
	Replica string
	// Addr is where this replica's fleet listener is reached (required,
	// same limits as Replica). It is published when this replica leads.
	Addr string
	// Workers is this replica's task worker count, published with its
	// registration: a leader sizes the fleet's workers scope by the sum
	// over the live replicas. Default 0; not negative.
	Workers int
	// TermTTL is how long a term runs without a renewal. Default 3s;
	// at least 10ms.
	TermTTL time.Duration
	// HeartbeatTimeout is how old a heartbeat may get before its replica
	// has lapsed. Default 3s; at least 10ms.
	HeartbeatTimeout time.Duration
	// CatalogVersion is the fleet's catalog version this replica serves
	// (weir.CatalogStore), recorded with its registration: a replica
	// that has just joined holds up the retirement of the scopes a newer
	// version left from the moment it is registered, before it can
	// admit anything. Default nil: 0, none.
	CatalogVersion func() int64
	// Clock runs an Elector's timers and measures its leadership
	// deadline. Default clock.Real.
	Clock clock.Clock
	// Logger defaults to none.
	Logger *slog.Logger
}

const (
	maxNameBytes = 200
	minDuration  = 10 * time.Millisecond
)

func (c *CoordConfig) defaults() {
	if c.TermTTL == 0 {
		c.TermTTL = 3 * time.Second
	}
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = 3 * time.Second
	}
	if c.Clock == nil {
		c.Clock = clock.Real
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

func (c *CoordConfig) validate() error {
	if err := checkName("replica id", c.Replica); err != nil {
		return err
	}
	if err := checkName("address", c.Addr); err != nil {
		return err
	}
	if c.Workers < 0 || c.Workers > math.MaxInt32 {
		return fmt.Errorf("fleet: workers %d: want 0 to %d", c.Workers, math.MaxInt32)
	}
	if c.TermTTL < minDuration {
		return fmt.Errorf("fleet: term TTL %v is below the minimum %v", c.TermTTL, minDuration)
	}
	if c.HeartbeatTimeout < minDuration {
		return fmt.Errorf("fleet: heartbeat timeout %v is below the minimum %v", c.HeartbeatTimeout, minDuration)
	}
	return nil
}

func checkName(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("fleet: %s is empty", what)
	case len(s) > maxNameBytes:
		return fmt.Errorf("fleet: %s is %d bytes, more than %d", what, len(s), maxNameBytes)
	case !utf8.ValidString(s):
		return fmt.Errorf("fleet: %s %q is not UTF-8", what, s)
	case strings.ContainsRune(s, 0):
		return fmt.Errorf("fleet: %s %q contains NUL", what, s)
	}
	return nil
}

// Coordinator is this replica's side of the election and the liveness
// table, on the store the replicas share (Coordination): it keeps the
// replica's id, address and generation, and checks what it passes on.
// Every method is one call of the store; all comparisons of time are
// the store's. It is safe for concurrent use.
type Coordinator struct {
	store Coordination
	cfg   CoordConfig
	gen   atomic.Uint64 // this replica's generation; 0 before Register
}

// NewCoordinator returns a Coordinator for the replica cfg describes, on
// store, whose schema is ready (postgres.Open migrates it).
func NewCoordinator(store Coordination, cfg CoordConfig) (*Coordinator, error) {
	if store == nil {
		return nil, errors.New("fleet: nil coordination store")
	}
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Coordinator{store: store, cfg: cfg}, nil
}

// Replica returns this replica's id.
func (c *Coordinator) Replica() string { return c.cfg.Replica }

// Gen returns the generation the last Register got, 0 before one.
func (c *Coordinator) Gen() uint64 { return c.gen.Load() }

// checkRange checks that an epoch or generation fits a signed 64-bit
// integer, as the store keeps them (PostgreSQL's bigint).
func checkRange(what string, v uint64) error {
	if v > math.MaxInt64 {
		return fmt.Errorf("fleet: %s %d out of range", what, v)
	}
	return nil
}

// Register records this replica with a generation newer than any its id
// had, a heartbeat now, and the catalog version it serves. A concurrent
// registration of the same id that got a newer generation wins; this one
// then gets ErrFenced.
func (c *Coordinator) Register(ctx context.Context) (uint64, error) {
	p := &ReplicaRegisterParams{ID: c.cfg.Replica, Addr: c.cfg.Addr, Workers: c.cfg.Workers}
	if c.cfg.CatalogVersion != nil {
		p.CatalogVersion = c.cfg.CatalogVersion()
	}
	gen, err := c.store.ReplicaRegister(ctx, p)
	if err != nil {
		return 0, fmt.Errorf("register %s: %w", c.cfg.Replica, err)
	}
	c.gen.Store(gen)
	return gen, nil
}

// Heartbeat marks this replica alive now. ErrFenced means its row is gone
// (it lapsed and the leader forgot it) or a newer generation of its id
// registered: the replica must stop.
func (c *Coordinator) Heartbeat(ctx context.Context) error {
	gen := c.gen.Load()
	if gen == 0 {
		return ErrNotRegistered
	}
	if err := c.store.ReplicaHeartbeat(ctx, c.cfg.Replica, gen); err != nil {
		return fmt.Errorf("heartbeat %s/%d: %w", c.cfg.Replica, gen, err)
	}
	return nil
}

// Leave removes this replica's registration, when it stops: the other
// replicas stop counting it as alive at once. A generation that is gone
// already is left alone.
func (c *Coordinator) Leave(ctx context.Context) error {
	gen := c.gen.Load()
	if gen == 0 {
		return nil
	}
	if err := c.store.ReplicaLeave(ctx, c.cfg.Replica, gen); err != nil {
		return fmt.Errorf("leave %s/%d: %w", c.cfg.Replica, gen, err)
	}
	return nil
}

// Campaign takes the term if it has expired: epoch+1, led by this replica
// until the store's now plus TermTTL, announced to the listeners. It
// reports whether it took it; if not, it returns the current term, which
// is then unexpired and someone else's (or this replica's own, still
// running).
func (c *Coordinator) Campaign(ctx context.Context) (Term, bool, error) {
	return c.campaign(ctx, &TermCampaignParams{})
}

// TakeOver is Campaign that also takes the term of epoch before it
// expires, if the store holds no life session (HoldLife) of the
// generation that leads it — checked in the step that takes it. Call it
// only for a leader whose process the caller has other proof of death
// for (its fleet listener refuses connections): a leader whose
// connection to the store alone was ended still runs, and still grants.
func (c *Coordinator) TakeOver(ctx context.Context, epoch uint64) (Term, bool, error) {
	if err := checkRange("epoch", epoch); err != nil {
		return Term{}, false, err
	}
	return c.campaign(ctx, &TermCampaignParams{TakeOver: true, Epoch: epoch})
}

func (c *Coordinator) campaign(ctx context.Context, p *TermCampaignParams) (Term, bool, error) {
	p.Replica, p.Addr, p.Gen, p.TTL = c.cfg.Replica, c.cfg.Addr, c.gen.Load(), c.cfg.TermTTL
	t, won, err := c.store.TermCampaign(ctx, p)
	if err != nil {
		return Term{}, false, fmt.Errorf("campaign %s: %w", c.cfg.Replica, err)
	}
	return t, won, nil
}

// Renew extends this replica's term to the store's now plus TermTTL. It
// reports false when epoch is not the current term, is not this
// replica's, or has already expired: the replica is deposed, and leads
// again only through Campaign, under a new epoch.
func (c *Coordinator) Renew(ctx context.Context, epoch uint64) (bool, error) {
	if err := checkRange("epoch", epoch); err != nil {
		return false, err
	}
	ok, err := c.store.TermRenew(ctx, &TermRenewParams{Epoch: epoch, Leader: c.cfg.Replica, TTL: c.cfg.TermTTL})
	if err != nil {
		return false, fmt.Errorf("renew epoch %d: %w", epoch, err)
	}
	return ok, nil
}

// Resign ends this replica's term now and announces it, so that another
// replica campaigns at once instead of waiting out the TTL. Resigning a
// term that is not this replica's, or has ended, changes nothing.
func (c *Coordinator) Resign(ctx context.Context, epoch uint64) error {
	if err := checkRange("epoch", epoch); err != nil {
		return err
	}
	if err := c.store.TermResign(ctx, epoch, c.cfg.Replica); err != nil {
		return fmt.Errorf("resign epoch %d: %w", epoch, err)
	}
	return nil
}

// Current reads the term.
func (c *Coordinator) Current(ctx context.Context) (Term, error) {
	t, err := c.store.TermGet(ctx)
	if err != nil {
		return Term{}, fmt.Errorf("read term: %w", err)
	}
	return t, nil
}

// Live returns the replicas whose last heartbeat is within
// HeartbeatTimeout of the store's now, by id.
func (c *Coordinator) Live(ctx context.Context) ([]Replica, error) {
	return c.replicas(ctx, false)
}

// Lapsed returns the replicas whose last heartbeat is HeartbeatTimeout or
// more before the store's now, by id.
func (c *Coordinator) Lapsed(ctx context.Context) ([]Replica, error) {
	return c.replicas(ctx, true)
}

func (c *Coordinator) replicas(ctx context.Context, lapsed bool) ([]Replica, error) {
	rs, err := c.store.ReplicaList(ctx, &ReplicaListParams{Timeout: c.cfg.HeartbeatTimeout, Lapsed: lapsed})
	if err != nil {
		return nil, fmt.Errorf("list replicas: %w", err)
	}
	return rs, nil
}

// Forget deletes the registration of a lapsed replica (id at generation
// gen) on behalf of the leader of epoch, and reports whether it did. It
// refuses — false, nothing changed — when epoch is no longer the current
// unexpired term led by this replica (a deposed leader's late write),
// when the replica heartbeated within HeartbeatTimeout, or when the row
// has another generation. Release what a replica held only after Forget
// returned true: from then on its heartbeats get ErrFenced.
func (c *Coordinator) Forget(ctx context.Context, epoch uint64, id string, gen uint64) (bool, error) {
	if err := checkRange("epoch", epoch); err != nil {
		return false, err
	}
	if err := checkRange("generation", gen); err != nil {
		return false, err
	}
	if err := checkName("replica id", id); err != nil {
		return false, err
	}
	done, err := c.store.ReplicaForget(ctx, &ReplicaForgetParams{Epoch: epoch, Leader: c.cfg.Replica, ID: id, Gen: gen,
		Timeout: c.cfg.HeartbeatTimeout})
	if err != nil {
		return false, fmt.Errorf("forget %s/%d under epoch %d: %w", id, gen, epoch, err)
	}
	return done, nil
}

// Secret returns the fleet's shared secret as the store keeps it, making
// one on the first call: replicas that are given no secret share this
// one. Concurrent first calls agree on one.
func (c *Coordinator) Secret(ctx context.Context) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("fleet: make a secret: %w", err)
	}
	secret, err := c.store.SecretEnsure(ctx, hex.EncodeToString(b))
	if err != nil {
		return "", fmt.Errorf("fleet: the fleet's secret: %w", err)
	}
	return secret, nil
}

// HoldLife holds this replica's life session until ctx ends, taking it
// again whenever the store loses it while the process lives
// (Liveness.LifeHold); then it returns nil.
func (c *Coordinator) HoldLife(ctx context.Context) error {
	gen := c.gen.Load()
	if gen == 0 {
		return ErrNotRegistered
	}
	if err := c.store.LifeHold(ctx, c.cfg.Replica, gen); err != nil {
		return fmt.Errorf("hold the life session of %s/%d: %w", c.cfg.Replica, gen, err)
	}
	return nil
}

// Life reports what the store knows of replica id at generation gen:
// its fleet listener's address while it is registered ("" once its
// registration is gone), and whether its life session is held.
func (c *Coordinator) Life(ctx context.Context, id string, gen uint64) (addr string, held bool, err error) {
	if err := checkRange("generation", gen); err != nil {
		return "", false, err
	}
	l, err := c.store.LifeGet(ctx, id, gen)
	if err != nil {
		return "", false, fmt.Errorf("life of %s/%d: %w", id, gen, err)
	}
	return l.Addr, l.Held, nil
}
