package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/weir-gateway/weir"
)

var _ weir.CatalogStore = (*DB)(nil)

// catalogChannelSQL names the channel of the schema whose
// catalog_versions table this connection's search_path finds: a
// publication NOTIFYs it with the new version's number.
const catalogChannelSQL = `SELECT 'weir_catalog_' || to_hex(hashtext(n.nspname::text))
	FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE c.oid = 'catalog_versions'::regclass`

const catalogColumns = `version, hash, document, published_by, published_at`

// CatalogCurrent is the newest published version.
func (db *DB) CatalogCurrent(ctx context.Context) (weir.CatalogVersion, error) {
	v, err := catalogCurrent(ctx, db.pool)
	if err != nil {
		return v, fmt.Errorf("read the fleet's catalog: %w", err)
	}
	return v, nil
}

func catalogCurrent(ctx context.Context, q querier) (weir.CatalogVersion, error) {
	var v weir.CatalogVersion
	var doc string
	err := q.QueryRow(ctx, `SELECT `+catalogColumns+` FROM catalog_versions ORDER BY version DESC LIMIT 1`).
		Scan(&v.Version, &v.Hash, &doc, &v.PublishedBy, &v.PublishedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return v, fmt.Errorf("%w: no catalog published yet", weir.ErrNotFound)
	}
	if err != nil {
		return v, classify(err)
	}
	v.Document = []byte(doc)
	return v, nil
}

// CatalogPublish stores p as the next version under a lock of the table
// (publishers take turns; readers are not held up), removes the versions
// older than the newest weir.CatalogKept that no registered replica
// serves, removes the run-time limits if p says so, and NOTIFYs the
// catalog's channel, all in one transaction: a replica that hears of the version reads it, and the
// limits' going, committed.
func (db *DB) CatalogPublish(ctx context.Context, p *weir.CatalogPublishParams) (weir.CatalogVersion, bool, error) {
	if err := p.Validate(); err != nil {
		return weir.CatalogVersion{}, false, fmt.Errorf("publish the catalog: %w", err)
	}
	var out weir.CatalogVersion
	published := false
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE catalog_versions IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		cur, err := catalogCurrent(ctx, tx)
		switch {
		case err == nil && (cur.Hash == p.Hash || p.OnlyFirst):
			out = cur
			return nil
		case err != nil && !errors.Is(err, weir.ErrNotFound):
			return err
		}
		var doc string
		err = tx.QueryRow(ctx, `INSERT INTO catalog_versions (version, hash, document, published_by)
			VALUES ($1, $2, $3, $4) RETURNING `+catalogColumns,
			cur.Version+1, p.Hash, string(p.Document), p.By).
			Scan(&out.Version, &out.Hash, &doc, &out.PublishedBy, &out.PublishedAt)
		if err != nil {
			return classify(err)
		}
		out.Document = []byte(doc)
		if p.ForgetLimits {
			if _, err := tx.Exec(ctx, `DELETE FROM scope_overrides WHERE kind = $1`, string(weir.OverrideLimit)); err != nil {
				return err
			}
		}
		// The history is bounded: the newest versions, and those a
		// registered replica still serves (it may not have taken the
		// newest yet).
		if _, err := tx.Exec(ctx, `DELETE FROM catalog_versions
			WHERE version <= $1 AND version NOT IN (SELECT catalog_version FROM weir_fleet_replicas)`,
			out.Version-weir.CatalogKept); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_notify((`+catalogChannelSQL+`), $1)`, strconv.FormatInt(out.Version, 10)); err != nil {
			return err
		}
		published = true
		return nil
	})
	if err != nil {
		return weir.CatalogVersion{}, false, fmt.Errorf("publish the catalog: %w", err)
	}
	return out, published, nil
}

// ListenCatalog calls f with each version published on this database's
// schema, on the DB's one LISTEN connection (listen.go), and with 0
// after each LISTEN on a new connection. It returns nil when ctx ends.
func (db *DB) ListenCatalog(ctx context.Context, f func(version int64)) error {
	return db.listener.follow(ctx, &subscription{catalog: f})
}

// CatalogServing records the version the registered replica id serves.
func (db *DB) CatalogServing(ctx context.Context, id string, version int64) error {
	if version < 0 {
		return fmt.Errorf("%w: catalog version %d", weir.ErrInvalid, version)
	}
	tag, err := db.pool.Exec(ctx, `UPDATE weir_fleet_replicas SET catalog_version = $2 WHERE id = $1`, id, version)
	if err != nil {
		return fmt.Errorf("record the catalog version %s serves: %w", id, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("record the catalog version %s serves: %w: no such replica registered", id, weir.ErrNotFound)
	}
	return nil
}

// CatalogServed reads the version each registered replica serves.
func (db *DB) CatalogServed(ctx context.Context) (map[string]int64, error) {
	rows, err := db.pool.Query(ctx, `SELECT id, catalog_version FROM weir_fleet_replicas`)
	if err != nil {
		return nil, fmt.Errorf("read the catalog versions the replicas serve: %w", classify(err))
	}
	out := make(map[string]int64)
	var id string
	var version int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &version}, func() error {
		out[id] = version
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read the catalog versions the replicas serve: %w", classify(err))
	}
	return out, nil
}
