package weir

import (
	"context"
	"fmt"
	"time"
)

// A CatalogVersion is one published version of a fleet's catalog: the
// catalog sections of a config file (platforms, platform models, models,
// groups, budgets, the default group) as they were written, with their
// environment references (api_key_env names, ${VAR}) unresolved, so
// that no secret is stored and each replica resolves them from its own
// environment. A fleet serves one version at a time, its newest.
type CatalogVersion struct {
	// Version counts the fleet's publications from 1.
	Version int64
	// Hash is the document's SHA-256, in hex: two files with the same
	// catalog have the same hash whatever their comments, layout and
	// server settings.
	Hash string
	// Document is the catalog sections in a canonical YAML
	// (config.CatalogDocument).
	Document []byte
	// PublishedBy says who published it: a replica's id, or "weir apply".
	PublishedBy string
	// PublishedAt is when, by the store's clock.
	PublishedAt time.Time
}

// CatalogKept is how many of the newest catalog versions a fleet keeps,
// beside those its replicas serve: older ones are removed as a version is
// published.
const CatalogKept = 20

// CatalogPublishParams are a publication (CatalogStore.CatalogPublish).
type CatalogPublishParams struct {
	// Hash and Document are the catalog's (CatalogVersion); required.
	Hash     string
	Document []byte
	// By is who publishes; required.
	By string
	// OnlyFirst publishes only into a fleet that has no version yet: a
	// replica's start, which must not override the fleet's catalog.
	OnlyFirst bool
	// ForgetLimits removes the run-time limits (OverrideLimit) in the
	// same transaction as a new version is stored: a new catalog's limits
	// replace them. Nothing is removed when no version is published.
	ForgetLimits bool
}

// Validate reports what a store refuses: ErrInvalid naming the field.
func (p *CatalogPublishParams) Validate() error {
	switch {
	case p.Hash == "":
		return fmt.Errorf("%w: a catalog's hash is required", ErrInvalid)
	case len(p.Document) == 0:
		return fmt.Errorf("%w: a catalog's document is required", ErrInvalid)
	case p.By == "":
		return fmt.Errorf("%w: who publishes a catalog is required", ErrInvalid)
	}
	return nil
}

// CatalogStore keeps a fleet's published catalog versions (PostgreSQL's;
// on SQLite one process serves its file's catalog and keeps none): the
// newest CatalogKept, and any a registered replica serves.
type CatalogStore interface {
	// CatalogCurrent is the newest version; ErrNotFound before the
	// first is published.
	CatalogCurrent(ctx context.Context) (CatalogVersion, error)
	// CatalogPublish stores p as the next version and tells every
	// replica listening (ListenCatalog), unless the newest version has
	// the same hash or p.OnlyFirst finds a version: then nothing changes.
	// It returns the newest version after it, and whether it published.
	CatalogPublish(ctx context.Context, p *CatalogPublishParams) (CatalogVersion, bool, error)
	// CatalogServing records that the registered replica id serves
	// version: a publication, which prunes old versions, keeps it.
	// ErrNotFound: no such replica is registered (yet).
	CatalogServing(ctx context.Context, id string, version int64) error
	// CatalogServed is the version each registered replica serves, by
	// its id, as it last recorded it (CatalogServing): 0 for one that
	// has recorded none yet.
	CatalogServed(ctx context.Context) (map[string]int64, error)
	// ListenCatalog calls f with each published version's number until
	// ctx ends, and with 0 whenever it may have missed some (after it
	// begins listening, and after a lost connection): then read the
	// newest. f must not block.
	ListenCatalog(ctx context.Context, f func(version int64)) error
}
