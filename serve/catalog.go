package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/internal/lifecycle"
)

// A fleet serves one catalog, the newest version published in
// PostgreSQL (weir.CatalogStore); docs/fleet.md says why and how.
//
//   - A replica that starts publishes its file's catalog only into a
//     fleet that has none yet. Otherwise it takes the fleet's version,
//     whatever its file says, and reports drift where they differ: a
//     warning in its log, weir_catalog_drift 1, a line of /readyz's body.
//   - A reload (SIGHUP) publishes the file's catalog when it differs from
//     the fleet's, as `weir apply` does, and applies it here.
//   - Every replica takes each version published: at once on its NOTIFY,
//     on the one LISTEN connection, and at worst at the next poll
//     (fleet.poll) when the notice was lost.
//
// The scopes a replica sets (gateway.Service.Apply and Take) are those
// of the version it applies, so the fleet's leader is told one version's
// limits, but for a replica that has not taken the newest yet. The
// scopes a version leaves are retired once every registered replica
// serves the same version (retireLocked), so that a request waiting on
// one at a replica that has not taken the version yet is moved when it
// does, rather than failed.

// catalogDeps are what a fleetCatalog works with.
type catalogDeps struct {
	store  weir.CatalogStore
	by     string      // this replica's id, as publisher
	clock  clock.Clock // default clock.Real
	poll   time.Duration
	logger *slog.Logger
	// base is this replica's config: a version's catalog joins its
	// settings and is resolved from its environment.
	base *config.Config
	// apply serves cfg's catalog; forget says the run-time limits go (an
	// operator's apply: gateway.Service.Apply, not Take).
	apply func(ctx context.Context, cfg *config.Config, forget bool) error
	// left retires the scopes the versions applied left
	// (gateway.Config.RetireLater); nil: apply retires them itself.
	left leftScopes
}

// leftScopes are the scopes the catalogs applied left, kept until
// retired: gateway.Service's.
type leftScopes interface {
	Leaving() bool
	RetireLeft(ctx context.Context) int
}

// fleetCatalog is this replica's part in its fleet's catalog.
type fleetCatalog struct {
	catalogDeps

	// mu makes publications and takes one at a time, in order.
	mu       sync.Mutex
	fileHash string // this replica's file's catalog, as last read
	applied  int64  // the version served; 0 before the first
	failed   int64  // the last version that could not be taken, said once
	// reported is the version last recorded as this replica's in the
	// store (CatalogServing), which keeps it while pruning old ones.
	reported int64
	state    atomic.Pointer[catalogState]
	wake     chan struct{}
	loop     lifecycle.Loop
}

// catalogState is what a replica reports of its catalog.
type catalogState struct {
	// Version and Hash are the fleet's version this replica serves.
	Version int64
	Hash    string
	// FileHash is its own file's catalog; Drift: the two differ.
	FileHash string
	Drift    bool
}

func newFleetCatalog(d catalogDeps) *fleetCatalog {
	if d.clock == nil {
		d.clock = clock.Real
	}
	if d.poll <= 0 {
		d.poll = 5 * time.Second
	}
	c := &fleetCatalog{catalogDeps: d, wake: make(chan struct{}, 1)}
	c.state.Store(&catalogState{})
	return c
}

// State is what this replica serves, for metrics, /readyz and the
// fleet's view.
func (c *fleetCatalog) State() catalogState { return *c.state.Load() }

// CatalogPublication is a config file's catalog to publish to a fleet
// (PublishCatalog).
type CatalogPublication struct {
	Store weir.CatalogStore
	// Base is the publisher's config: the file's catalog must make a
	// valid catalog with it, resolved from the publisher's environment.
	Base *config.Config
	// File is the config file's text; By says who publishes.
	File []byte
	By   string
	// OnlyFirst publishes into an empty fleet only (a replica's start).
	OnlyFirst bool
}

// PublishCatalog publishes p's file's catalog as the fleet's newest
// version, unless the newest has the same catalog (or p.OnlyFirst finds
// one): what `weir apply` and a replica's reload do. A new version
// forgets the run-time limits. A catalog that is not valid publishes
// nothing. It returns the newest version, and whether it is p's new one.
func PublishCatalog(ctx context.Context, p *CatalogPublication) (weir.CatalogVersion, bool, error) {
	doc, hash, err := config.CatalogDocument(p.File)
	if err != nil {
		return weir.CatalogVersion{}, false, invalidCatalog{err}
	}
	if _, err := p.Base.WithCatalog(doc); err != nil {
		return weir.CatalogVersion{}, false, invalidCatalog{err}
	}
	return p.Store.CatalogPublish(ctx, &weir.CatalogPublishParams{
		Hash: hash, Document: doc, By: p.By, OnlyFirst: p.OnlyFirst, ForgetLimits: true})
}

// invalidCatalog is a catalog PublishCatalog refused: its message is
// err's, and it matches weir.ErrInvalid.
type invalidCatalog struct{ err error }

func (e invalidCatalog) Error() string   { return e.err.Error() }
func (e invalidCatalog) Unwrap() []error { return []error{e.err, weir.ErrInvalid} }

// PublishFile publishes data's catalog as an operator's apply does
// (POST /admin/catalog; by names who): the fleet's newest version unless
// it has the same catalog, taken here at once and by the others on its
// notice. A catalog that is not valid publishes nothing, with an error
// matching weir.ErrInvalid. Drift is still told against this replica's
// own file.
func (c *fleetCatalog) PublishFile(ctx context.Context, data []byte, by string) (weir.CatalogVersion, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, published, err := PublishCatalog(ctx, &CatalogPublication{Store: c.store, Base: c.base, File: data, By: by})
	if err != nil || v.Version <= c.applied {
		return v, published, err
	}
	if err := c.takeLocked(ctx, v, true); err != nil {
		// Published all the same: the others take it; this replica says
		// why it cannot.
		c.logger.Error("published a catalog this replica cannot take; serving the one applied", "error", err, "serving", c.applied)
	}
	return v, published, nil
}

// Begin serves the fleet's catalog as a replica's start does: data's
// (the file's) into a fleet that has none, else the fleet's version.
func (c *fleetCatalog) Begin(ctx context.Context, data []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, published, err := c.publishLocked(ctx, data, true)
	if err != nil {
		return err
	}
	if published {
		c.logger.Info("published this replica's catalog as the fleet's first", "version", v.Version, "hash", short(v.Hash))
	}
	return c.takeLocked(ctx, v, published)
}

// Publish is a reload: data's catalog becomes the fleet's newest version
// if it differs from it (PublishCatalog), and is applied here,
// forgetting the run-time limits.
func (c *fleetCatalog) Publish(ctx context.Context, data []byte) (weir.CatalogVersion, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, published, err := c.publishLocked(ctx, data, false)
	if err != nil {
		return v, false, err
	}
	return v, published, c.takeLocked(ctx, v, true)
}

// publishLocked is PublishCatalog of this replica's file data, which
// becomes the file drift is told against. The caller holds mu.
func (c *fleetCatalog) publishLocked(ctx context.Context, data []byte, onlyFirst bool) (weir.CatalogVersion, bool, error) {
	_, hash, err := config.CatalogDocument(data)
	if err != nil {
		return weir.CatalogVersion{}, false, err
	}
	v, published, err := PublishCatalog(ctx, &CatalogPublication{Store: c.store, Base: c.base, File: data, By: c.by, OnlyFirst: onlyFirst})
	if err != nil {
		return v, false, err
	}
	c.fileHash = hash
	return v, published, nil
}

// takeLocked serves version v (forget: as an operator's apply). A
// version this replica cannot make a catalog of (a platform model that
// needs an environment variable not set here) leaves it on what it
// serves, and says so. The caller holds mu.
func (c *fleetCatalog) takeLocked(ctx context.Context, v weir.CatalogVersion, forget bool) error {
	cfg, err := c.base.WithCatalog(v.Document)
	if err == nil {
		err = c.apply(ctx, cfg, forget)
	}
	if err != nil {
		return fmt.Errorf("apply the fleet's catalog version %d (published by %s): %w", v.Version, v.PublishedBy, err)
	}
	c.applied = v.Version
	was := c.state.Load()
	now := &catalogState{Version: v.Version, Hash: v.Hash, FileHash: c.fileHash, Drift: v.Hash != c.fileHash}
	c.state.Store(now)
	switch {
	case now.Drift && (!was.Drift || was.Version == 0):
		c.logger.Warn("this replica's config file has another catalog than the fleet's: it serves the fleet's (reload, or weir apply, publishes a file's)",
			"version", v.Version, "fleet_hash", short(v.Hash), "file_hash", short(c.fileHash), "published_by", v.PublishedBy)
	case !now.Drift && was.Drift:
		c.logger.Info("the fleet's catalog is this replica's file's again", "version", v.Version)
	}
	c.reportLocked(ctx)
	c.retireLocked(ctx)
	return nil
}

// short is a hash's first 12 digits, for logs.
func short(hash string) string { return hash[:min(len(hash), 12)] }

// Start follows the fleet's versions until Stop: each notice, and each
// poll, reads the newest and takes it if it is newer than what is
// served.
func (c *fleetCatalog) Start(context.Context) error {
	c.loop.Go(c.follow)
	return nil
}

// Stop ends Start's following, waiting for a take under way.
func (c *fleetCatalog) Stop(ctx context.Context) error { return c.loop.Stop(ctx) }

func (c *fleetCatalog) follow(ctx context.Context) error {
	listening := make(chan error, 1)
	go func() {
		listening <- c.store.ListenCatalog(ctx, func(v int64) {
			if v == 0 || v > c.State().Version {
				c.nudge()
			}
		})
	}()
	defer func() { <-listening }()
	for {
		wait, t := clock.After(c.clock, c.poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-c.wake:
			t.Stop()
		case <-wait:
		}
		c.catchUp(ctx)
	}
}

// nudge asks follow to read the newest version now.
func (c *fleetCatalog) nudge() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// catchUp takes the newest version if it is newer than what is served.
func (c *fleetCatalog) catchUp(ctx context.Context) {
	v, err := c.store.CatalogCurrent(ctx)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, weir.ErrNotFound) {
			c.logger.Warn("could not read the fleet's catalog; serving the one applied", "error", err)
		}
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v.Version <= c.applied {
		c.reportLocked(ctx)
		c.retireLocked(ctx)
		return
	}
	if err := c.takeLocked(ctx, v, false); err != nil {
		if c.failed == v.Version {
			return
		}
		c.failed = v.Version
		c.logger.Error("could not take the fleet's new catalog; serving the one applied", "error", err, "serving", c.applied)
		return
	}
	c.logger.Info("took the fleet's catalog", "version", v.Version, "published_by", v.PublishedBy, "hash", short(v.Hash))
}

// FleetConfig is cfg with the catalog its fleet on db serves (the newest
// version), for a command that checks names against the catalog (a
// key's group, a budget's subject); cfg itself on SQLite, or before a
// version is published.
func FleetConfig(ctx context.Context, db *Storage, cfg *config.Config) (*config.Config, error) {
	if db.Fleet == nil {
		return cfg, nil
	}
	v, err := db.Fleet.CatalogCurrent(ctx)
	if errors.Is(err, weir.ErrNotFound) {
		return cfg, nil
	}
	if err != nil {
		return nil, err
	}
	return cfg.WithCatalog(v.Document)
}

// reportLocked records the version served as this replica's, unless it
// is already. A replica takes its first version before it joins the
// fleet: its registration records that one (Main.catalogServed), and
// this records the versions it takes after, once it is registered (at
// a later poll if not yet). The caller holds mu.
func (c *fleetCatalog) reportLocked(ctx context.Context) {
	if c.applied == 0 || c.reported == c.applied {
		return
	}
	err := c.store.CatalogServing(ctx, c.by, c.applied)
	switch {
	case err == nil:
		c.reported = c.applied
	case !errors.Is(err, weir.ErrNotFound) && ctx.Err() == nil:
		c.logger.Warn("could not record the catalog version this replica serves; retried at the next poll", "error", err)
	}
}

// retireLocked retires the scopes the versions applied left, once every
// registered replica that records a version serves this one's: none
// still has a request waiting on them that its take of the version
// would move. Until then a replica that has not taken the version, or
// cannot, keeps them: the leader enforces their limits, and no request
// of a replica serving the version routes to them. A replica leaves the
// registry when it stops, or when the leader fences it once it missed
// its heartbeats (fleet.heartbeat_timeout); one that records no version
// (it is of a release that records none) holds nothing up. A replica
// that has just joined is registered with the version it serves, so it
// holds them up from before it can admit anything. The last replica to
// take a version retires them as it takes it; the others find them
// retired at their next poll. The caller holds mu.
func (c *fleetCatalog) retireLocked(ctx context.Context) {
	if c.left == nil || c.applied == 0 || c.reported != c.applied || !c.left.Leaving() {
		return
	}
	served, err := c.store.CatalogServed(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.logger.Warn("could not read the catalog versions the replicas serve; the scopes the catalog left are retired at a later poll", "error", err)
		}
		return
	}
	for id, v := range served {
		if v != 0 && v != c.applied {
			c.logger.Debug("the scopes the catalog left wait for a replica", "replica", id, "serving", v, "version", c.applied)
			return
		}
	}
	if n := c.left.RetireLeft(ctx); n > 0 {
		c.logger.Info("retired the scopes the catalog left: every replica serves it", "version", c.applied, "retired", n)
	}
}
