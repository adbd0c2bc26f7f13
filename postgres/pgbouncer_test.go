package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-gateway/weir/fleet"
	"github.com/weir-gateway/weir/pgtest"
)

// TestElectorThroughPgBouncer runs an Elector through a real PgBouncer:
// in transaction pooling mode LISTEN silently receives nothing, and Run
// must say so (fleet.ErrNoListen) instead of running deaf; in session
// mode it works. It needs the pgbouncer binary and is skipped, loudly,
// without it (it fails instead under WEIR_TEST_PGBOUNCER=require, as in
// CI).
func TestElectorThroughPgBouncer(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"transaction", "session"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			direct := pgtest.Schema(t)
			open(t, direct) // migrates: PgBouncer in transaction mode would break the migration lock
			dsn := startPgBouncer(t, direct, mode)
			db := newDB(newPool(t, dsn, "fleet-bouncer-"+mode), nil)
			db.probeTimeout = time.Second
			r := runElector(t, db, "a", fleet.CoordConfig{TermTTL: time.Minute, HeartbeatTimeout: time.Minute})
			if mode == "session" {
				waitTerm(t, r, "a leads through a session-pooled PgBouncer", ledBy("a", 1))
				return
			}
			select {
			case err := <-r.done:
				r.done <- err
				if !errors.Is(err, fleet.ErrNoListen) {
					t.Fatalf("Run through a transaction-pooled PgBouncer = %v, want ErrNoListen", err)
				}
			case <-time.After(guard):
				t.Fatal("Run through a transaction-pooled PgBouncer went on without working LISTEN")
			}
		})
	}
}

// startPgBouncer runs PgBouncer in front of schemaDSN's server for the
// test, in the given pool mode, and returns a DSN through it whose server
// connections use schemaDSN's schema.
func startPgBouncer(t *testing.T, schemaDSN, mode string) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/pgbouncer"); err != nil {
			if os.Getenv("WEIR_TEST_PGBOUNCER") == "require" {
				t.Fatal("pgbouncer is not installed, and WEIR_TEST_PGBOUNCER=require")
			}
			t.Skip("SKIPPED: pgbouncer is not installed (apt-get install pgbouncer)")
		}
	}
	u, err := url.Parse(schemaDSN)
	if err != nil {
		t.Fatal(err)
	}
	schema := u.Query().Get("search_path")
	server, err := pgx.ParseConfig(pgtest.BaseDSN())
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	dir := t.TempDir()
	users := filepath.Join(dir, "users.txt")
	ini := filepath.Join(dir, "pgbouncer.ini")
	// PgBouncer passes no search_path through: each server connection
	// sets the test's schema itself, and no reset query (DISCARD ALL in
	// session mode) takes it away again.
	conf := fmt.Sprintf(`[databases]
fleet = host=%s port=%d dbname=%s user=%s connect_query='SET search_path = %s'

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = %s
ignore_startup_parameters = extra_float_digits
server_reset_query =
`, server.Host, server.Port, server.Database, server.User, schema, port, users, mode)
	if err := os.WriteFile(ini, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(users, []byte(fmt.Sprintf("%q \"\"\n", server.User)), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{ini}
	if os.Geteuid() == 0 {
		// PgBouncer will not run as root; the server's own account can
		// read the test's files.
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		args = []string{"-u", "postgres", ini}
	}
	cmd := exec.Command(bin, args...)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	// Simple protocol: PgBouncer before 1.21 keeps no prepared statements
	// across transactions, as operators of transaction pooling configure
	// their clients.
	dsn := fmt.Sprintf("postgres://%s@127.0.0.1:%d/fleet?sslmode=disable&default_query_exec_mode=simple_protocol", server.User, port)
	deadline := time.Now().Add(guard)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, dsn)
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return dsn
		}
		select {
		case <-exited:
			t.Fatalf("pgbouncer exited: %s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgbouncer did not answer within %v: %v\n%s", guard, err, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lockedBuffer collects a child process's output for a failure message.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
