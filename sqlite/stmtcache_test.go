package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"modernc.org/sqlite"
)

// countingConnector counts the statements its connections prepare.
type countingConnector struct {
	inner    driver.Connector
	prepared *atomic.Int64
}

func (c countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countingConn{fullConn: conn.(fullConn), prepared: c.prepared}, nil
}

func (c countingConnector) Driver() driver.Driver { return c.inner.Driver() }

type countingConn struct {
	fullConn
	prepared *atomic.Int64
}

func (c *countingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	c.prepared.Add(1)
	return c.fullConn.PrepareContext(ctx, query)
}

// setupCache opens a file database on one connection through the
// statement cache, with a table t of n rows (v = 1..n); prepared counts
// the statements it prepares.
func setupCache(t *testing.T, n int) (db *sql.DB, prepared *atomic.Int64) {
	t.Helper()
	inner, err := sqlite.NewConnector(filepath.Join(t.TempDir(), "cache.db"))
	if err != nil {
		t.Fatal(err)
	}
	prepared = new(atomic.Int64)
	db = sql.OpenDB(cachingConnector{inner: countingConnector{inner: inner, prepared: prepared}})
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE t (v INTEGER)`); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		if _, err := db.Exec(`INSERT INTO t (v) VALUES (?)`, i); err != nil {
			t.Fatal(err)
		}
	}
	return db, prepared
}

func TestStmtCacheReusesStatements(t *testing.T) {
	t.Parallel()
	db, prepared := setupCache(t, 100)
	// CREATE and INSERT were prepared once each.
	if got := prepared.Load(); got != 2 {
		t.Fatalf("prepared %d statements for 1 CREATE and 100 INSERTs, want 2", got)
	}
	for i := 1; i <= 100; i++ {
		var v int
		if err := db.QueryRow(`SELECT v FROM t WHERE v = ?`, i).Scan(&v); err != nil || v != i {
			t.Fatalf("row %d: got %d, %v", i, v, err)
		}
	}
	if got := prepared.Load(); got != 3 {
		t.Errorf("prepared %d statements after 100 runs of one SELECT, want 3", got)
	}
}

// A query of the same SQL while the rows of the last are open gets a
// statement of its own; the cached one is reused once they close.
func TestStmtCacheBusyStatement(t *testing.T) {
	t.Parallel()
	db, prepared := setupCache(t, 3)
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	const q = `SELECT v FROM t WHERE v >= ? ORDER BY v`
	outer, err := tx.Query(q, 1)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for outer.Next() {
		var a int
		if err := outer.Scan(&a); err != nil {
			t.Fatal(err)
		}
		inner, err := tx.Query(q, a)
		if err != nil {
			t.Fatal(err)
		}
		for inner.Next() {
			var b int
			if err := inner.Scan(&b); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%d%d", a, b))
		}
		if err := inner.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := outer.Close(); err != nil {
		t.Fatal(err)
	}
	if want := "[11 12 13 22 23 33]"; fmt.Sprint(got) != want {
		t.Errorf("nested reads of one statement: %v, want %s", got, want)
	}
	before := prepared.Load()
	var n int
	if err := tx.QueryRow(q, 2).Scan(&n); err != nil || n != 2 {
		t.Fatalf("read after the nested ones: %d, %v", n, err)
	}
	if got := prepared.Load(); got != before {
		t.Errorf("the cached statement was prepared again (%d → %d), want it reused", before, got)
	}
}

// Past stmtCacheSize statements the least recently used is finalized,
// and preparing it again gives the same answers; an evicted statement
// whose rows are open is finalized when they close.
func TestStmtCacheEviction(t *testing.T) {
	t.Parallel()
	db, prepared := setupCache(t, 1)
	tx, err := db.Begin() // one connection throughout
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	open, err := tx.Query(`SELECT v FROM t`)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		for i := range 2 * stmtCacheSize {
			var v int
			if err := tx.QueryRow(fmt.Sprintf(`SELECT v + %d FROM t`, i)).Scan(&v); err != nil || v != 1+i {
				t.Fatalf("round %d, query %d: %d, %v; want %d", round, i, v, err, 1+i)
			}
		}
	}
	if !open.Next() {
		t.Fatalf("the evicted statement's rows: %v", open.Err())
	}
	var v int
	if err := open.Scan(&v); err != nil || v != 1 {
		t.Fatalf("the evicted statement's row: %d, %v", v, err)
	}
	if err := open.Close(); err != nil {
		t.Fatal(err)
	}
	// CREATE, INSERT, the open SELECT, and each of the others twice: the
	// second round finds none of the first's left.
	if got, want := prepared.Load(), int64(3+4*stmtCacheSize); got != want {
		t.Errorf("prepared %d statements, want %d", got, want)
	}
	if err := tx.QueryRow(`SELECT v FROM t`).Scan(&v); err != nil || v != 1 {
		t.Fatalf("the evicted statement's SQL again: %d, %v", v, err)
	}
}
