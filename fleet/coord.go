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

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weir-gateway/weir/clock"
)

// Coordination through PostgreSQL
//
// Several `weir serve` replicas share one PostgreSQL. One of them at a time
// is the admission leader; the others send it their requests. This part of
// the package decides, in PostgreSQL, who leads and who is alive.
//
// Who decides. PostgreSQL, through one row (weir_fleet_term): an epoch, the
// leader's replica id and address, and an expiry. A replica takes the term
// with Campaign only once it has expired (expires_at <= now()), or, at once,
// from an earlier registration of its own replica id (leader_gen below its
// generation: the process that held it restarted, and a replica id runs
// once), raising the epoch by one; the campaign locks the row first
// (SELECT … FOR UPDATE), so of any number of concurrent campaigners
// exactly one takes it, and the others see the winner's term. The leader extends it
// with Renew, which succeeds only while the term is still its own and
// unexpired; a term that lapsed, even if no one took it, is never revived:
// leading again means a new epoch, so one epoch is one unbroken
// leadership.
//
// How a deposed leader's late write is refused. A TTL alone admits two
// holders: a leader paused past its term still believes it leads when it
// resumes. So every write a leader makes on the leader's behalf carries its
// epoch and is checked against the term row in the same statement or
// transaction: Forget does this itself, and other writes call Fence in
// their transaction. Both lock the term row FOR KEY SHARE, which a
// campaign's FOR UPDATE waits for: a write checked under epoch N commits
// before epoch N+1 can begin, or is refused. Renew is a plain update and
// does not wait for fenced writes. Keep fenced transactions short: a
// campaign waits for them.
//
// Who is alive. Each replica registers (weir_fleet_replicas) with a new
// generation and heartbeats every HeartbeatTimeout/3. A replica whose
// heartbeat is older than HeartbeatTimeout by PostgreSQL's clock has
// lapsed; the leader forgets it (Forget, fenced by the leader's epoch and
// refused if the replica heartbeated meanwhile) and only then releases
// what it held. A forgotten replica, or one superseded by a newer
// registration of its id, gets ErrFenced on its next heartbeat and must
// stop. Generations come from one sequence, so they only grow, across
// restarts and forgetting alike.
//
// How terms are found. Each new epoch and each resignation is announced
// by a NOTIFY, sent by a trigger in the updating transaction, on a channel
// named after the tables' schema; a term that simply runs out announces
// nothing, so followers also campaign when the term they last read is due
// to expire. An Elector LISTENs on a dedicated
// connection; when that connection is lost it connects again, LISTENs
// again and re-reads the term in full, since notifications sent in between
// are lost. A jittered poll (ElectorConfig.Poll) is only the safety net.
// LISTEN needs a session of its own: a PgBouncer in transaction or
// statement pooling mode silently drops notifications (and its session
// advisory lock breaks Migrate), so the fleet needs a direct DSN or a
// session-pooled one. An Elector checks this when it starts: it NOTIFYs
// its own LISTEN connection from another connection of the pool, and
// fails with ErrNoListen when nothing arrives.
//
// The clocks. Every comparison of times in the database — expiry,
// heartbeat age — uses PostgreSQL's now(), never a replica's wall clock.
// Locally an Elector uses the injected clock.Clock (monotonic in
// production) only for its own timers and for one deadline: it holds the
// leadership only while Now() < (when the last successful renew or
// campaign was sent) + TermTTL − Margin. The send time comes before
// PostgreSQL's now() in that statement, so the local deadline falls before
// the database's expiry as long as the two clocks run at about the same
// rate; Margin covers the difference and the time a caller takes to act
// on Leading(). A process paused past its term (SIGSTOP, a long GC pause,
// a frozen VM) sees on resume that the deadline has passed before it does
// anything. Network timeouts on single statements use context deadlines.

// ErrFenced means this replica's registration is gone or was superseded by
// a newer generation of the same id: it must stop acting as that replica.
var ErrFenced = errors.New("fleet: replica fenced: its registration is gone or superseded")

// ErrDeposed means the epoch a write was made under is no longer the
// current, unexpired term.
var ErrDeposed = errors.New("fleet: deposed: the epoch is no longer the current term")

// ErrNotRegistered means Heartbeat was called before Register.
var ErrNotRegistered = errors.New("fleet: replica not registered")

// Term is one leadership: the epoch, who holds it and where it is reached.
type Term struct {
	Epoch  uint64
	Leader string // replica id; empty before the first term
	Addr   string // the leader's fleet listener
	// Left is how long the term had to run when it was read, by
	// PostgreSQL's clock; zero once it has expired or was resigned, when
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
	// HeartbeatAge is how old its last heartbeat was when read, by
	// PostgreSQL's clock.
	HeartbeatAge time.Duration
	// Session says whether PostgreSQL holds the replica's life session
	// (HoldLife): false once the process that registered is gone, or
	// while its connection is being made again.
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
// table. Every method is one SQL round trip; all comparisons of time are
// made by PostgreSQL. It is safe for concurrent use.
type Coordinator struct {
	pool *pgxpool.Pool
	cfg  CoordConfig
	gen  atomic.Uint64 // this replica's generation; 0 before Register
}

// NewCoordinator returns a Coordinator for the replica cfg describes, on
// a pool whose schema Migrate has prepared.
func NewCoordinator(pool *pgxpool.Pool, cfg CoordConfig) (*Coordinator, error) {
	if pool == nil {
		return nil, errors.New("fleet: nil pool")
	}
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Coordinator{pool: pool, cfg: cfg}, nil
}

// Replica returns this replica's id.
func (c *Coordinator) Replica() string { return c.cfg.Replica }

// Gen returns the generation the last Register got, 0 before one.
func (c *Coordinator) Gen() uint64 { return c.gen.Load() }

// micros passes a duration to SQL as whole microseconds, the resolution
// of timestamptz.
func micros(d time.Duration) int64 { return d.Microseconds() }

// leftSQL is how long the term row has left, in microseconds, never below 0.
const leftSQL = `greatest(0, floor(extract(epoch FROM expires_at - now()) * 1000000))::bigint`

// toInt64 checks that an epoch or generation fits PostgreSQL's bigint.
func toInt64(what string, v uint64) (int64, error) {
	if v > math.MaxInt64 {
		return 0, fmt.Errorf("fleet: %s %d out of range", what, v)
	}
	return int64(v), nil
}

// Register records this replica with a generation newer than any its id
// had, and a heartbeat now. A concurrent registration of the same id that
// got a newer generation wins; this one then gets ErrFenced.
func (c *Coordinator) Register(ctx context.Context) (uint64, error) {
	var gen int64
	err := c.pool.QueryRow(ctx, `
		INSERT INTO weir_fleet_replicas AS r (id, gen, addr, workers, started_at, heartbeat_at)
		VALUES ($1, nextval('weir_fleet_replica_gen'), $2, $3, now(), now())
		ON CONFLICT (id) DO UPDATE
		SET gen = EXCLUDED.gen, addr = EXCLUDED.addr, workers = EXCLUDED.workers,
		    started_at = now(), heartbeat_at = now()
		WHERE r.gen < EXCLUDED.gen
		RETURNING gen`, c.cfg.Replica, c.cfg.Addr, c.cfg.Workers).Scan(&gen)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("register %s: %w", c.cfg.Replica, ErrFenced)
	}
	if err != nil {
		return 0, fmt.Errorf("register %s: %w", c.cfg.Replica, err)
	}
	c.gen.Store(uint64(gen))
	return uint64(gen), nil
}

// Heartbeat marks this replica alive now. ErrFenced means its row is gone
// (it lapsed and the leader forgot it) or a newer generation of its id
// registered: the replica must stop.
func (c *Coordinator) Heartbeat(ctx context.Context) error {
	gen := c.gen.Load()
	if gen == 0 {
		return ErrNotRegistered
	}
	tag, err := c.pool.Exec(ctx, `
		UPDATE weir_fleet_replicas SET heartbeat_at = now()
		WHERE id = $1 AND gen = $2`, c.cfg.Replica, int64(gen))
	if err != nil {
		return fmt.Errorf("heartbeat %s/%d: %w", c.cfg.Replica, gen, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("heartbeat %s/%d: %w", c.cfg.Replica, gen, ErrFenced)
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
	if _, err := c.pool.Exec(ctx, `DELETE FROM weir_fleet_replicas WHERE id = $1 AND gen = $2`, c.cfg.Replica, int64(gen)); err != nil {
		return fmt.Errorf("leave %s/%d: %w", c.cfg.Replica, gen, err)
	}
	return nil
}

// Campaign takes the term if it has expired: epoch+1, led by this replica
// until now()+TermTTL, announced by NOTIFY in the same transaction. It
// reports whether it took it; if not, it returns the current term, which
// is then unexpired and someone else's (or this replica's own, still
// running). One round trip: the row lock and the update go in one batch,
// one implicit transaction.
func (c *Coordinator) Campaign(ctx context.Context) (Term, bool, error) {
	return c.campaign(ctx, -1)
}

// TakeOver is Campaign that also takes the term of epoch before it
// expires, if PostgreSQL holds no life session (HoldLife) of the
// generation that leads it — checked in the statement that takes it.
// Call it only for a leader whose process the caller has other proof
// of death for (its fleet listener refuses connections): a leader whose
// PostgreSQL connection alone was ended still runs, and still grants.
func (c *Coordinator) TakeOver(ctx context.Context, epoch uint64) (Term, bool, error) {
	e, err := toInt64("epoch", epoch)
	if err != nil {
		return Term{}, false, err
	}
	return c.campaign(ctx, e)
}

// campaign takes the term if it has expired, or if early is its epoch
// and its leader's life session is gone.
func (c *Coordinator) campaign(ctx context.Context, early int64) (Term, bool, error) {
	// The row lock comes first, for two reasons: a campaigner that loses
	// reads the winner's term rather than the expired one its snapshot
	// held, and FOR UPDATE waits for every fenced transaction (FOR KEY
	// SHARE), which the UPDATE's own weaker row lock would not.
	b := &pgx.Batch{}
	var cur Term
	var curEpoch, curLeft int64
	b.Queue(`SELECT epoch, leader, addr, ` + leftSQL + ` FROM weir_fleet_term FOR UPDATE`).
		QueryRow(func(row pgx.Row) error {
			return row.Scan(&curEpoch, &cur.Leader, &cur.Addr, &curLeft)
		})
	var won bool
	var newEpoch int64
	b.Queue(`
		UPDATE weir_fleet_term
		SET epoch = epoch + 1, leader = $1, addr = $2, expires_at = now() + $3 * interval '1 microsecond', leader_gen = $4
		WHERE expires_at <= now() OR (leader = $1 AND leader_gen < $4)
		   OR (epoch = $5 AND leader_gen > 0 AND NOT `+lifeHeldSQL("leader_gen")+`)
		RETURNING epoch`, c.cfg.Replica, c.cfg.Addr, micros(c.cfg.TermTTL), int64(c.gen.Load()), early).
		QueryRow(func(row pgx.Row) error {
			err := row.Scan(&newEpoch)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			won = err == nil
			return err
		})
	if err := c.pool.SendBatch(ctx, b).Close(); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			err = errors.New("the term row is missing; run fleet.Migrate")
		}
		return Term{}, false, fmt.Errorf("campaign %s: %w", c.cfg.Replica, err)
	}
	if won {
		return Term{Epoch: uint64(newEpoch), Leader: c.cfg.Replica, Addr: c.cfg.Addr, Left: c.cfg.TermTTL}, true, nil
	}
	cur.Epoch = uint64(curEpoch)
	cur.Left = time.Duration(curLeft) * time.Microsecond
	return cur, false, nil
}

// Renew extends this replica's term to now()+TermTTL. It reports false
// when epoch is not the current term, is not this replica's, or has
// already expired: the replica is deposed, and leads again only through
// Campaign, under a new epoch.
func (c *Coordinator) Renew(ctx context.Context, epoch uint64) (bool, error) {
	e, err := toInt64("epoch", epoch)
	if err != nil {
		return false, err
	}
	tag, err := c.pool.Exec(ctx, `
		UPDATE weir_fleet_term SET expires_at = now() + $3 * interval '1 microsecond'
		WHERE epoch = $1 AND leader = $2 AND expires_at > now()`,
		e, c.cfg.Replica, micros(c.cfg.TermTTL))
	if err != nil {
		return false, fmt.Errorf("renew epoch %d: %w", epoch, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Resign ends this replica's term now and announces it, so that another
// replica campaigns at once instead of waiting out the TTL. Resigning a
// term that is not this replica's, or has ended, changes nothing.
func (c *Coordinator) Resign(ctx context.Context, epoch uint64) error {
	e, err := toInt64("epoch", epoch)
	if err != nil {
		return err
	}
	if _, err := c.pool.Exec(ctx, `
		UPDATE weir_fleet_term SET expires_at = now()
		WHERE epoch = $1 AND leader = $2 AND expires_at > now()`,
		e, c.cfg.Replica); err != nil {
		return fmt.Errorf("resign epoch %d: %w", epoch, err)
	}
	return nil
}

// Current reads the term.
func (c *Coordinator) Current(ctx context.Context) (Term, error) {
	var t Term
	var epoch, left int64
	err := c.pool.QueryRow(ctx, `SELECT epoch, leader, addr, `+leftSQL+` FROM weir_fleet_term`).
		Scan(&epoch, &t.Leader, &t.Addr, &left)
	if errors.Is(err, pgx.ErrNoRows) {
		return Term{}, errors.New("read term: the term row is missing; run fleet.Migrate")
	}
	if err != nil {
		return Term{}, fmt.Errorf("read term: %w", err)
	}
	t.Epoch = uint64(epoch)
	t.Left = time.Duration(left) * time.Microsecond
	return t, nil
}

// Live returns the replicas whose last heartbeat is within
// HeartbeatTimeout of now(), by id.
func (c *Coordinator) Live(ctx context.Context) ([]Replica, error) {
	return c.replicas(ctx, `heartbeat_at > now() - $1 * interval '1 microsecond'`)
}

// Lapsed returns the replicas whose last heartbeat is HeartbeatTimeout or
// more before now(), by id.
func (c *Coordinator) Lapsed(ctx context.Context) ([]Replica, error) {
	return c.replicas(ctx, `heartbeat_at <= now() - $1 * interval '1 microsecond'`)
}

func (c *Coordinator) replicas(ctx context.Context, where string) ([]Replica, error) {
	rows, err := c.pool.Query(ctx, `
		SELECT id, gen, addr, workers, floor(extract(epoch FROM now() - heartbeat_at) * 1000000)::bigint, `+lifeHeldSQL("gen")+`
		FROM weir_fleet_replicas WHERE `+where+` ORDER BY id`, micros(c.cfg.HeartbeatTimeout))
	if err != nil {
		return nil, fmt.Errorf("list replicas: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Replica, error) {
		var r Replica
		var gen, age int64
		err := row.Scan(&r.ID, &gen, &r.Addr, &r.Workers, &age, &r.Session)
		r.Gen = uint64(gen)
		r.HeartbeatAge = time.Duration(age) * time.Microsecond
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("list replicas: %w", err)
	}
	return out, nil
}

// fenceSQL locks the term row against a campaign and yields a row only
// while $1 is the current, unexpired term and led by $2. The expiry is
// checked at the statement's own time: inside a longer transaction now()
// would be the transaction's start.
const fenceSQL = `SELECT 1 FROM weir_fleet_term
	WHERE epoch = $1 AND leader = $2 AND expires_at > statement_timestamp() FOR KEY SHARE`

// Forget deletes the row of a lapsed replica (id at generation gen) on
// behalf of the leader of epoch, and reports whether it did. It refuses —
// false, nothing changed — when epoch is no longer the current unexpired
// term led by this replica (a deposed leader's late write), when the
// replica heartbeated within HeartbeatTimeout, or when the row has another
// generation. Release what a replica held only after Forget returned true:
// from then on its heartbeats get ErrFenced.
func (c *Coordinator) Forget(ctx context.Context, epoch uint64, id string, gen uint64) (bool, error) {
	e, err := toInt64("epoch", epoch)
	if err != nil {
		return false, err
	}
	g, err := toInt64("generation", gen)
	if err != nil {
		return false, err
	}
	if err := checkName("replica id", id); err != nil {
		return false, err
	}
	tag, err := c.pool.Exec(ctx, `
		DELETE FROM weir_fleet_replicas r
		USING (`+fenceSQL+`) AS fence
		WHERE r.id = $3 AND r.gen = $4
		  AND r.heartbeat_at <= now() - $5 * interval '1 microsecond'`,
		e, c.cfg.Replica, id, g, micros(c.cfg.HeartbeatTimeout))
	if err != nil {
		return false, fmt.Errorf("forget %s/%d under epoch %d: %w", id, gen, epoch, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Fence checks, inside tx, that epoch is still the current unexpired term
// and led by this replica, and holds the term row so that no campaign can
// begin a new epoch until tx ends. Call it in every transaction that
// writes on the leader's behalf, before its writes; ErrDeposed means roll
// back.
func (c *Coordinator) Fence(ctx context.Context, tx pgx.Tx, epoch uint64) error {
	e, err := toInt64("epoch", epoch)
	if err != nil {
		return err
	}
	var one int
	err = tx.QueryRow(ctx, fenceSQL, e, c.cfg.Replica).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("fence epoch %d: %w", epoch, ErrDeposed)
	}
	if err != nil {
		return fmt.Errorf("fence epoch %d: %w", epoch, err)
	}
	return nil
}

// Secret returns the fleet's shared secret as the database keeps it,
// making one on the first call in the schema: replicas that are given
// no secret share this one. Concurrent first calls agree on one.
func (c *Coordinator) Secret(ctx context.Context) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("fleet: make a secret: %w", err)
	}
	// Two statements: a SELECT in the INSERT's own statement would not see
	// a row that a concurrent first call committed while the INSERT
	// waited for it.
	if _, err := c.pool.Exec(ctx, `INSERT INTO weir_fleet_secret (secret) VALUES ($1)
		ON CONFLICT (singleton) DO NOTHING`, hex.EncodeToString(b)); err != nil {
		return "", fmt.Errorf("fleet: make the fleet's secret: %w", err)
	}
	var secret string
	err := c.pool.QueryRow(ctx, `SELECT secret FROM weir_fleet_secret`).Scan(&secret)
	if err != nil {
		return "", fmt.Errorf("fleet: read the fleet's secret: %w", err)
	}
	return secret, nil
}

// A replica's life session: a session-level advisory lock that the
// replica holds on a connection of its own for as long as its process
// lives (HoldLife, kept by its Elector). PostgreSQL ends a backend whose
// client's socket closed, and with it the lock, at once: a replica whose
// lock is free has lost its connection to PostgreSQL — its process died,
// or the connection alone was ended (pg_terminate_backend, a restart of
// PostgreSQL), which the replica mends by connecting again. A paused or
// cut-off process keeps its backend, and its lock. The lock's keys are
// a hash of the schema, so that fleets in other schemas of a database
// never meet, and the generation.

// lifeClassSQL is the first key of the life locks: the schema's.
const lifeClassSQL = `(SELECT hashtext(n.nspname::text || '.weir_fleet_life')
	FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE c.oid = 'weir_fleet_replicas'::regclass)`

// lifeHeldSQL is true while the life lock of the generation gen (an SQL
// expression) is held.
func lifeHeldSQL(gen string) string {
	return `EXISTS (SELECT 1 FROM pg_locks lk
		WHERE lk.locktype = 'advisory' AND lk.objsubid = 2 AND lk.granted
		  AND lk.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND lk.classid = (` + lifeClassSQL + `::bigint & 4294967295)::oid
		  AND lk.objid = ((` + gen + `) & 2147483647)::oid)`
}

// HoldLife takes this replica's life lock on conn, a connection that
// serves nothing else and stays open for as long as the process runs.
// It waits while the lock is held by an earlier connection of this
// replica's that PostgreSQL has not yet seen end.
func (c *Coordinator) HoldLife(ctx context.Context, conn *pgx.Conn) error {
	gen := c.gen.Load()
	if gen == 0 {
		return ErrNotRegistered
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(`+lifeClassSQL+`, ($1::bigint & 2147483647)::int4)`, int64(gen)); err != nil {
		return fmt.Errorf("hold the life lock of %s/%d: %w", c.cfg.Replica, gen, err)
	}
	return nil
}

// Life reports what PostgreSQL knows of replica id at generation gen:
// its fleet listener's address while it is registered ("" once its
// registration is gone), and whether its life lock is held.
func (c *Coordinator) Life(ctx context.Context, id string, gen uint64) (addr string, held bool, err error) {
	g, err := toInt64("generation", gen)
	if err != nil {
		return "", false, err
	}
	var a *string
	err = c.pool.QueryRow(ctx, `
		SELECT (SELECT addr FROM weir_fleet_replicas WHERE id = $1 AND gen = $2), `+lifeHeldSQL("$2::bigint"), id, g).Scan(&a, &held)
	if err != nil {
		return "", false, fmt.Errorf("life of %s/%d: %w", id, gen, err)
	}
	if a != nil {
		addr = *a
	}
	return addr, held, nil
}
