// Package pgtest gives tests a PostgreSQL schema of their own on the
// machine's real server.
//
// The server is found at WEIR_TEST_POSTGRES_DSN, or at
// postgres://postgres@127.0.0.1:5432/test. When it does not answer, a test
// that asks for it is skipped with a loud reason — the README's test
// command must pass on a fresh machine without PostgreSQL — unless
// WEIR_TEST_POSTGRES=require (as .ci/run sets it), when it fails instead.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultDSN is where the tests look for PostgreSQL unless
// WEIR_TEST_POSTGRES_DSN says otherwise.
const DefaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// BaseDSN is the server's DSN, without a schema of the test's own.
func BaseDSN() string {
	if dsn := os.Getenv("WEIR_TEST_POSTGRES_DSN"); dsn != "" {
		return dsn
	}
	return DefaultDSN
}

var (
	reachOnce sync.Once
	reachErr  error
)

// reachable dials the server once per test binary.
func reachable() error {
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, BaseDSN())
		if err != nil {
			reachErr = err
			return
		}
		defer conn.Close(ctx)
		reachErr = conn.Ping(ctx)
	})
	return reachErr
}

// Require skips t (or fails it, under WEIR_TEST_POSTGRES=require) when
// PostgreSQL does not answer.
func Require(t testing.TB) {
	t.Helper()
	err := reachable()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("PostgreSQL at %s does not answer (%v)", BaseDSN(), err)
	if os.Getenv("WEIR_TEST_POSTGRES") == "require" {
		t.Fatalf("%s, and WEIR_TEST_POSTGRES=require", msg)
	}
	t.Skipf("SKIPPED: %s; set WEIR_TEST_POSTGRES=require to make this a failure", msg)
}

// Schema creates a schema of the test's own, drops it (with everything in
// it) when the test ends, and returns a DSN whose connections use it as
// their search_path. Every connection opened with the DSN, by any pool or
// process, sees the same schema.
func Schema(t testing.TB) string {
	t.Helper()
	Require(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, BaseDSN())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("pgtest: create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, BaseDSN())
		if err != nil {
			t.Errorf("pgtest: drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+name+" CASCADE"); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", name, err)
		}
	})
	return withSearchPath(BaseDSN(), name)
}

// withSearchPath adds search_path=name to dsn, in URL or key=value form.
func withSearchPath(dsn, name string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		return dsn + sep + "search_path=" + name
	}
	return dsn + " search_path=" + name
}

// Pool opens a pool on a schema of the test's own (Schema), closed when
// the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dsn := Schema(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}
