// Package pgbench runs PostgreSQL's own pgbench as the baseline of the
// fleet's benchmarks (docs/benchmarks.md, fleet-admit): clients that
// each update one row of a scratch table, again and again. Every such
// transaction takes the row's lock and waits for its commit, so it is
// what a fleet that wrote each admission to the database would pay at
// least; a fleet that admits faster than pgbench updates is cheaper than
// the database it stands on.
//
// The package depends only on pgx and the pgbench binary, so that both
// a Go benchmark and the harness in package bench can run it.
package pgbench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// Statement is the transaction each client runs, on the scratch table
// (whose name Run qualifies with its schema).
const Statement = "UPDATE t SET v = v + 1 WHERE id = 1"

// ErrNoBinary is returned when the pgbench binary cannot be found.
var ErrNoBinary = errors.New("pgbench: the pgbench binary is not installed")

// Config is one run's.
type Config struct {
	// DSN is the database, in a form both pgx and libpq (which pgbench
	// uses) read: a postgres:// URL or key=value pairs with libpq's
	// keywords only — not pgx's own, such as search_path (required).
	DSN string
	// Clients is pgbench's -c, the concurrent sessions; default 8.
	Clients int
	// Jobs is pgbench's -j, its threads; default 2.
	Jobs int
	// Duration is pgbench's -T, in whole seconds (rounded, at least 1);
	// default 5s.
	Duration time.Duration
	// Binary is the pgbench to run; default "pgbench" on the PATH.
	Binary string
}

// Result is what pgbench reported, and what the table says.
type Result struct {
	// TPS is transactions per second, without the time spent connecting.
	TPS float64
	// Transactions is how many committed; Failed how many did not.
	Transactions int64
	Failed       int64
	// Updates is the counter the transactions raised, read back from the
	// table: Transactions when every commit counted.
	Updates int64
	// LatencyAvg is pgbench's average transaction latency.
	LatencyAvg time.Duration
	// Clients, Jobs and Duration are as run.
	Clients  int
	Jobs     int
	Duration time.Duration
	// Schema held the scratch table; it is dropped when Run returns.
	Schema string
	// Command is the command line run; Output pgbench's whole output.
	Command []string
	Output  string
}

// Run creates a scratch table in a schema of its own, runs pgbench on it
// for the duration, drops the schema and returns pgbench's figures.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.DSN == "" {
		return Result{}, errors.New("pgbench: a DSN is required")
	}
	if cfg.Clients <= 0 {
		cfg.Clients = 8
	}
	if cfg.Jobs <= 0 {
		cfg.Jobs = 2
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 5 * time.Second
	}
	if cfg.Binary == "" {
		cfg.Binary = "pgbench"
	}
	bin, err := exec.LookPath(cfg.Binary)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %v", ErrNoBinary, err)
	}
	secs := max(1, int64(cfg.Duration.Round(time.Second)/time.Second))

	conn, err := pgx.Connect(ctx, cfg.DSN)
	if err != nil {
		return Result{}, fmt.Errorf("pgbench: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "pgbench_" + hex.EncodeToString(b[:])
	table := schema + ".t"
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return Result{}, fmt.Errorf("pgbench: create schema: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = conn.Exec(dctx, "DROP SCHEMA "+schema+" CASCADE")
	}()
	if _, err := conn.Exec(ctx, "CREATE TABLE "+table+" (id int PRIMARY KEY, v bigint NOT NULL)"); err != nil {
		return Result{}, fmt.Errorf("pgbench: create table: %w", err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO "+table+" VALUES (1, 0)"); err != nil {
		return Result{}, fmt.Errorf("pgbench: insert the row: %w", err)
	}

	dir, err := os.MkdirTemp("", "weir-pgbench-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "script.sql")
	stmt := "UPDATE " + table + " SET v = v + 1 WHERE id = 1;\n"
	if err := os.WriteFile(script, []byte(stmt), 0o600); err != nil {
		return Result{}, err
	}
	args := []string{"-n", "-c", strconv.Itoa(cfg.Clients), "-j", strconv.Itoa(cfg.Jobs),
		"-T", strconv.FormatInt(secs, 10), "-f", script, cfg.DSN}
	cmd := exec.CommandContext(ctx, bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	res := Result{Clients: cfg.Clients, Jobs: cfg.Jobs, Duration: time.Duration(secs) * time.Second, Schema: schema,
		Command: append([]string{bin}, args...)}
	err = cmd.Run()
	res.Output = out.String()
	if err != nil {
		return res, fmt.Errorf("pgbench: %w: %s", err, bytes.TrimSpace(out.Bytes()))
	}
	if err := parse(res.Output, &res); err != nil {
		return res, err
	}
	if err := conn.QueryRow(ctx, "SELECT v FROM "+table+" WHERE id = 1").Scan(&res.Updates); err != nil {
		return res, fmt.Errorf("pgbench: read the counter back: %w", err)
	}
	return res, nil
}

var (
	tpsRe     = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)
	txRe      = regexp.MustCompile(`(?m)^number of transactions actually processed: ([0-9]+)`)
	failedRe  = regexp.MustCompile(`(?m)^number of failed transactions: ([0-9]+)`)
	latencyRe = regexp.MustCompile(`(?m)^latency average = ([0-9.]+) ms`)
)

// parse reads pgbench's report into r; the TPS and the transactions
// processed are required, the rest is taken when present.
func parse(out string, r *Result) error {
	m := tpsRe.FindStringSubmatch(out)
	if m == nil {
		return fmt.Errorf("pgbench: no tps in its output: %q", out)
	}
	tps, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return fmt.Errorf("pgbench: tps %q: %w", m[1], err)
	}
	r.TPS = tps
	m = txRe.FindStringSubmatch(out)
	if m == nil {
		return fmt.Errorf("pgbench: no transaction count in its output: %q", out)
	}
	if r.Transactions, err = strconv.ParseInt(m[1], 10, 64); err != nil {
		return fmt.Errorf("pgbench: transactions %q: %w", m[1], err)
	}
	if m = failedRe.FindStringSubmatch(out); m != nil {
		r.Failed, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m = latencyRe.FindStringSubmatch(out); m != nil {
		if ms, err := strconv.ParseFloat(m[1], 64); err == nil {
			r.LatencyAvg = time.Duration(ms * float64(time.Millisecond))
		}
	}
	return nil
}
