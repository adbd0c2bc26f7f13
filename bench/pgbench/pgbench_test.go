package pgbench

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-gateway/weir/pgtest"
)

// report is pgbench 15's output for a custom script.
const report = `pgbench (15.20 (Debian 15.20-0+deb12u1))
transaction type: /tmp/script.sql
scaling factor: 1
query mode: simple
number of clients: 8
number of threads: 2
maximum number of tries: 1
duration: 2 s
number of transactions actually processed: 7472
number of failed transactions: 0 (0.000%)
latency average = 2.143 ms
initial connection time = 10.535 ms
tps = 3732.838286 (without initial connection time)
`

func TestParse(t *testing.T) {
	t.Parallel()
	var r Result
	if err := parse(report, &r); err != nil {
		t.Fatal(err)
	}
	if r.TPS != 3732.838286 || r.Transactions != 7472 || r.Failed != 0 || r.LatencyAvg != 2143*time.Microsecond {
		t.Fatalf("parsed %+v", r)
	}
	for _, bad := range []string{"", "tps = x (without initial connection time)\n", "tps = 12.5 (without initial connection time)\n"} {
		if err := parse(bad, &r); err == nil {
			t.Errorf("parse(%q) succeeded; want an error", bad)
		}
	}
}

// TestRun runs pgbench for a second on the real server: every committed
// transaction raised the counter once, and the scratch schema is gone
// afterwards.
func TestRun(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	ctx := context.Background()
	r, err := Run(ctx, Config{DSN: pgtest.BaseDSN(), Clients: 2, Jobs: 1, Duration: time.Second})
	if errors.Is(err, ErrNoBinary) {
		t.Skipf("SKIPPED: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if r.TPS <= 0 || r.Transactions <= 0 || r.Failed != 0 {
		t.Fatalf("tps %g, %d transactions, %d failed; want some, none failed\n%s", r.TPS, r.Transactions, r.Failed, r.Output)
	}
	if r.Updates != r.Transactions {
		t.Fatalf("the counter reads %d after %d transactions", r.Updates, r.Transactions)
	}
	if r.Duration != time.Second || r.Clients != 2 || r.Schema == "" {
		t.Fatalf("ran %s with %d clients in schema %q; want 1s with 2 in a schema", r.Duration, r.Clients, r.Schema)
	}
	conn, err := pgx.Connect(ctx, pgtest.BaseDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var left bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", r.Schema).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left {
		t.Fatalf("the scratch schema %q is still there", r.Schema)
	}
}

func TestRunRefusesNoDSN(t *testing.T) {
	t.Parallel()
	if _, err := Run(context.Background(), Config{}); err == nil {
		t.Fatal("Run without a DSN succeeded")
	}
}
