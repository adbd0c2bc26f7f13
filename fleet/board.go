package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/internal/lifecycle"
)

// BoardConfig configures a Board.
type BoardConfig struct {
	// Replica is this replica's id in the fleet.
	Replica string
	// Interval is how often the Board writes this replica's offer and
	// reads the others' (default 1s). A change of this replica's nodes is
	// written at once.
	Interval time.Duration
	// TTL is how old another replica's offer may be and still count
	// (default 5 × Interval): a replica that stopped writing is gone.
	TTL time.Duration
	// Offer is what Start's Run offers the others; nil: this replica
	// has no nodes of its own and only reads.
	Offer  *Offer
	Clock  clock.Clock
	Logger *slog.Logger
}

func (c *BoardConfig) defaults() {
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.TTL <= 0 {
		c.TTL = 5 * c.Interval
	}
	if c.Clock == nil {
		c.Clock = clock.Real
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Board is where the fleet's replicas publish the edge nodes that dialed
// them, and learn the others': an offer per replica in the store they
// share (NodeBoard; a row of weir_fleet_nodes on PostgreSQL). It is the
// edge.Directory of a replica's edge.Relay. What it knows of the others
// is as old as its last read, at most Interval: a node it still offers
// may be gone, which the engine settles (a gone node's scopes are fenced
// at the leader, so nothing is admitted there) and the relay answers
// (weir.ErrNodeGone).
type Board struct {
	store NodeBoard
	cfg   BoardConfig
	loop  lifecycle.Loop // Start's Run

	mu      sync.Mutex
	byModel map[string][]weir.NodeTarget
	where   map[nodeGen]string
	views   []RemoteNodes
	// readAt is when the last Read succeeded, by the Clock: what it read
	// counts for TTL after, no longer (PostgreSQL may be out of reach,
	// and the others' nodes gone meanwhile).
	readAt time.Time
}

// RemoteNodes is another replica's admin view of its nodes, as it last
// published it.
type RemoteNodes struct {
	Replica string
	// Age is how long ago the replica published it, by the store's
	// clock, as of the Read.
	Age   time.Duration
	Nodes []weir.NodeView
	// Addr is the base URL the replica is reached at (its offer's).
	Addr string
}

type nodeGen struct {
	node string
	gen  uint64
}

// NewBoard returns a Board on store, whose schema is ready
// (postgres.Open migrates it).
func NewBoard(store NodeBoard, cfg BoardConfig) (*Board, error) {
	if store == nil {
		return nil, errors.New("fleet: nil board store")
	}
	cfg.defaults()
	if err := checkName("replica", cfg.Replica); err != nil {
		return nil, err
	}
	return &Board{store: store, cfg: cfg, byModel: map[string][]weir.NodeTarget{}, where: map[nodeGen]string{}}, nil
}

// Offer is what a replica offers the others on its board.
type Offer struct {
	// Addr is the base URL (http://host:port) at which the other replicas
	// reach this replica's HTTP API to relay runs to its nodes.
	Addr string
	// Served is what its nodes serve now: public model → the providers
	// serving it (edge.Hub.Served).
	Served func() map[string][]weir.NodeTarget
	// Changes has a value when Served may have changed (edge.Hub.Changes).
	Changes <-chan struct{}
	// Nodes is its admin view of its nodes (edge.Hub.Nodes), published
	// for the other replicas' /admin/nodes; nil: none.
	Nodes func(context.Context) []weir.NodeView
}

// Publish writes what this replica's nodes serve (public model → the
// providers serving it) as its offer, relayed to at addr, with views,
// its admin view of them.
func (b *Board) Publish(ctx context.Context, addr string, served map[string][]weir.NodeTarget, views []weir.NodeView) error {
	doc, err := json.Marshal(served)
	if err != nil {
		return fmt.Errorf("fleet: publish nodes: %w", err)
	}
	if views == nil {
		views = []weir.NodeView{}
	}
	viewDoc, err := json.Marshal(views)
	if err != nil {
		return fmt.Errorf("fleet: publish nodes: %w", err)
	}
	if err := b.store.BoardPublish(ctx, &BoardPublishParams{Replica: b.cfg.Replica, Addr: addr, Served: doc, Nodes: viewDoc}); err != nil {
		return fmt.Errorf("fleet: publish nodes: %w", err)
	}
	return nil
}

// Leave removes this replica's offer: the others stop offering its nodes
// at their next read.
func (b *Board) Leave(ctx context.Context) error {
	if err := b.store.BoardLeave(ctx, b.cfg.Replica); err != nil {
		return fmt.Errorf("fleet: withdraw nodes: %w", err)
	}
	return nil
}

// Read reads the other replicas' offers younger than TTL. A node offered
// by two (it moved, and the replica it left has not written since) is
// taken at its newest generation.
func (b *Board) Read(ctx context.Context) error {
	read, err := b.store.BoardRead(ctx, &BoardReadParams{Except: b.cfg.Replica, TTL: b.cfg.TTL})
	if err != nil {
		return fmt.Errorf("fleet: read nodes: %w", err)
	}
	type offer struct {
		addr   string
		served map[string][]weir.NodeTarget
		views  RemoteNodes
	}
	// A row this replica cannot read (another version's) leaves that
	// replica's nodes out, not the others'.
	offers := make([]offer, 0, len(read))
	for _, r := range read {
		o := offer{addr: r.Addr, views: RemoteNodes{Replica: r.Replica, Age: r.Age, Addr: r.Addr}}
		if err := json.Unmarshal(r.Served, &o.served); err != nil {
			b.cfg.Logger.Warn("fleet: another replica's nodes are unreadable; they are not offered here", "replica", r.Replica, "error", err)
			continue
		}
		if err := json.Unmarshal(r.Nodes, &o.views.Nodes); len(r.Nodes) > 0 && err != nil {
			// Its nodes still serve; only /admin/nodes goes without them.
			b.cfg.Logger.Warn("fleet: another replica's view of its nodes is unreadable", "replica", r.Replica, "error", err)
		}
		offers = append(offers, o)
	}
	newest := map[string]uint64{}
	for _, o := range offers {
		for _, ts := range o.served {
			for _, t := range ts {
				newest[t.Node] = max(newest[t.Node], t.Gen)
			}
		}
	}
	byModel := map[string][]weir.NodeTarget{}
	where := map[nodeGen]string{}
	views := make([]RemoteNodes, 0, len(offers))
	for _, o := range offers {
		views = append(views, o.views)
		for m, ts := range o.served {
			for _, t := range ts {
				if t.Gen != newest[t.Node] {
					continue
				}
				byModel[m] = append(byModel[m], t)
				where[nodeGen{t.Node, t.Gen}] = o.addr
			}
		}
	}
	for _, ts := range byModel {
		slices.SortFunc(ts, weir.CompareNodeTargets)
	}
	b.mu.Lock()
	b.byModel, b.where, b.views, b.readAt = byModel, where, views, b.cfg.Clock.Now()
	b.mu.Unlock()
	return nil
}

// freshLocked reports whether the last Read is recent enough to count.
func (b *Board) freshLocked() bool {
	return !b.readAt.IsZero() && b.cfg.Clock.Now().Sub(b.readAt) < b.cfg.TTL
}

// Nodes is the other replicas' admin views of their nodes, by replica,
// as of the last Read.
func (b *Board) Nodes() []RemoteNodes {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.freshLocked() {
		return nil
	}
	return slices.Clone(b.views)
}

// Holding is the base URLs of the other replicas whose nodes, as of the
// last Read, include node (by id or name), whether its session there is
// live or gone (edge.Holders).
func (b *Board) Holding(node string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.freshLocked() {
		return nil
	}
	var out []string
	for _, v := range b.views {
		if slices.ContainsFunc(v.Nodes, func(n weir.NodeView) bool { return n.ID == node || n.Name == node }) {
			out = append(out, v.Addr)
		}
	}
	return out
}

// Serving lists the other replicas' node providers serving the public
// model, as of the last Read; nothing once that is TTL old.
func (b *Board) Serving(model string) []weir.NodeTarget {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.freshLocked() {
		return nil
	}
	return slices.Clone(b.byModel[model])
}

// Where is the base URL of the replica whose node's session of
// generation gen this is, as of the last Read.
func (b *Board) Where(node string, gen uint64) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.freshLocked() {
		return "", false
	}
	addr, ok := b.where[nodeGen{node, gen}]
	return addr, ok
}

// Start runs the board (Run with Config.Offer) until Stop.
func (b *Board) Start(context.Context) error {
	b.loop.Go(func(ctx context.Context) error {
		b.Run(ctx, b.cfg.Offer)
		return nil
	})
	return nil
}

// Stop ends Start's Run, which withdraws this replica's offer.
func (b *Board) Stop(ctx context.Context) error { return b.loop.Stop(ctx) }

// Run keeps the board until ctx ends: every Interval it writes this
// replica's offer (if o is not nil: a replica without nodes of its own
// only reads) and reads the others'; a change of o's writes it at once.
// When ctx ends it removes the offer. Failures are logged; the next
// round tries again.
func (b *Board) Run(ctx context.Context, o *Offer) {
	var changes <-chan struct{}
	if o != nil {
		changes = o.Changes
	}
	tick := make(chan struct{}, 1)
	var timer clock.Timer
	arm := func() {
		timer = b.cfg.Clock.AfterFunc(b.cfg.Interval, func() {
			select {
			case tick <- struct{}{}:
			default:
			}
		})
	}
	publish := func() {
		if o == nil {
			return
		}
		var views []weir.NodeView
		if o.Nodes != nil {
			views = o.Nodes(ctx)
		}
		if err := b.Publish(ctx, o.Addr, o.Served(), views); err != nil && ctx.Err() == nil {
			b.cfg.Logger.Warn("fleet: could not publish this replica's nodes", "error", err)
		}
	}
	for {
		publish()
		if err := b.Read(ctx); err != nil && ctx.Err() == nil {
			b.cfg.Logger.Warn("fleet: could not read the other replicas' nodes", "error", err)
		}
		arm()
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				timer.Stop()
				b.leave(ctx, o != nil)
				return
			case <-tick:
				waiting = false
			case <-changes:
				publish()
			}
		}
	}
}

// leave removes the offer, if this replica made one, once Run's ctx ended.
func (b *Board) leave(ctx context.Context, offered bool) {
	if !offered {
		return
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := b.Leave(lctx); err != nil {
		b.cfg.Logger.Warn("fleet: could not withdraw this replica's nodes; they lapse after the board's TTL", "error", err)
	}
}
