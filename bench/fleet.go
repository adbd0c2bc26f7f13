package bench

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/postgres"
	"github.com/weir-gateway/weir/sqlite"
)

// FleetConfig says whether a scenario runs its gateway as a fleet: several
// `weir serve` child processes on one PostgreSQL schema, joined by their
// config's fleet section, which the load reaches in turn.
type FleetConfig struct {
	Replicas int    // replicas; 0 runs no fleet (0)
	DSN      string // the PostgreSQL server; each run makes a schema of its own there and drops it after (DefaultDSN())
}

// DefaultDSN is the PostgreSQL server the fleet scenarios use unless told
// otherwise: the one the tests use (package pgtest), WEIR_TEST_POSTGRES_DSN
// or postgres://postgres@127.0.0.1:5432/test.
func DefaultDSN() string {
	if dsn := os.Getenv("WEIR_TEST_POSTGRES_DSN"); dsn != "" {
		return dsn
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

func (f FleetConfig) validate() error {
	switch {
	case f.Replicas < 0:
		return errors.New("--fleet must not be negative")
	case f.Replicas > 0 && f.DSN == "":
		return errors.New("--dsn is required with --fleet")
	}
	return nil
}

// serveFile is a `weir serve` config file the harness writes.
type serveFile struct {
	// Listen is the gateway's address; "": a free loopback port.
	Listen string
	// Server holds more lines of the server section, indented by two
	// spaces: the harness sets the listener (a free loopback port) and the
	// log level (info, so that the "weir serving" line says the port;
	// requests are logged at debug).
	Server string
	// Storage is the storage section, with the fleet section on
	// PostgreSQL: sqliteStorage or fleetStorage.
	Storage string
	// Rest is the tasks section and the catalog.
	Rest string
}

func (f serveFile) text() string {
	listen := cmp.Or(f.Listen, "127.0.0.1:0")
	return "server:\n  listen: " + listen + "\n  log_level: info\n" + f.Server + f.Storage + f.Rest
}

func (f serveFile) write(path string) error { return os.WriteFile(path, []byte(f.text()), 0o600) }

// sqliteStorage is the storage section of one gateway on the SQLite file
// at path.
func sqliteStorage(path string) string { return fmt.Sprintf("storage:\n  path: %s\n", path) }

// fleetStorage is the storage and fleet sections of replica id on the
// PostgreSQL database at dsn: its fleet listener on a free loopback port,
// the fleet's timings their defaults.
func fleetStorage(dsn, id string) string {
	return fmt.Sprintf("storage:\n  driver: postgres\n  dsn: %s\nfleet:\n  replica: %s\n  listen: 127.0.0.1:0\n",
		strconv.Quote(dsn), id)
}

// withParam adds a connection parameter to a URL or key=value DSN.
func withParam(dsn, k, v string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		return dsn + sep + k + "=" + v
	}
	return dsn + " " + k + "=" + v
}

// pgSchema is a schema of a run's own on the server at base, as package
// pgtest gives each test one: every connection of its DSN uses it as its
// search_path.
type pgSchema struct {
	base, name string
}

func createSchema(ctx context.Context, base string) (*pgSchema, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	s := &pgSchema{base: base, name: "weir_bench_" + hex.EncodeToString(b[:])}
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL at %s: %w", base, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+s.name); err != nil {
		return nil, fmt.Errorf("create schema %s: %w", s.name, err)
	}
	return s, nil
}

func (s *pgSchema) dsn() string { return withParam(s.base, "search_path", s.name) }

// drop drops the schema and everything in it.
func (s *pgSchema) drop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.base)
	if err != nil {
		return fmt.Errorf("drop schema %s: %w", s.name, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA "+s.name+" CASCADE"); err != nil {
		return fmt.Errorf("drop schema %s: %w", s.name, err)
	}
	return nil
}

// fleetParams say how startFleet starts a fleet.
type fleetParams struct {
	Weir   Weir
	Fleet  FleetConfig
	Dir    string       // where the replicas' config files go
	Server string       // serveFile.Server
	Rest   string       // serveFile.Rest
	Key    *weir.APIKey // created, with its secret, before the replicas start
}

// fleetRun is a fleet of `weir serve` children on a schema of its own.
type fleetRun struct {
	schema   *pgSchema
	replicas []*child
	ids      []string
	secret   string
}

// startFleet creates a schema, brings Weir's tables up in it, creates
// p.Key there, and starts the replicas r0, r1, … one after the other (so
// r0 is elected first and normally leads), each with a config file of its
// own; it returns once every one answers /readyz.
func startFleet(ctx context.Context, p fleetParams) (_ *fleetRun, err error) {
	s, err := createSchema(ctx, p.Fleet.DSN)
	if err != nil {
		return nil, err
	}
	f := &fleetRun{schema: s}
	defer func() {
		if err != nil {
			f.stop()
		}
	}()
	db, err := postgres.Open(ctx, s.dsn())
	if err != nil {
		return nil, err
	}
	f.secret, err = p.Weir.CreateKey(ctx, db, p.Key)
	_ = db.Close()
	if err != nil {
		return nil, err
	}
	for i := range p.Fleet.Replicas {
		id := fmt.Sprintf("r%d", i)
		c, err := f.startReplica(p, id, p.Rest)
		if err != nil {
			return nil, err
		}
		f.replicas, f.ids = append(f.replicas, c), append(f.ids, id)
	}
	for i, c := range f.replicas {
		if err := waitReady(ctx, c.url, time.Minute); err != nil {
			return nil, fmt.Errorf("replica %s: %w", f.ids[i], err)
		}
	}
	return f, nil
}

// startReplica writes replica id's config file, with rest as its catalog,
// and starts it on f's schema; it returns once the child serves.
func (f *fleetRun) startReplica(p fleetParams, id, rest string) (*child, error) {
	path := filepath.Join(p.Dir, "replica-"+id+".yaml")
	file := serveFile{Server: p.Server, Storage: fleetStorage(f.schema.dsn(), id), Rest: rest}
	if err := file.write(path); err != nil {
		return nil, err
	}
	c, err := startChild(p.Weir.Exe, append(slices.Clone(p.Weir.ServeArgs), "-c", path), 2*time.Minute, nil)
	if err != nil {
		return nil, fmt.Errorf("replica %s: %w", id, err)
	}
	return c, nil
}

// waitReady waits until url's /readyz answers 200.
func waitReady(ctx context.Context, url string, within time.Duration) error {
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(within)
	for {
		resp, err := client.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/readyz answered %s", resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %s: %w", within, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond): // polling the child's endpoint
		}
	}
}

// urls are the replicas' HTTP roots, in order.
func (f *fleetRun) urls() []string {
	urls := make([]string, len(f.replicas))
	for i, c := range f.replicas {
		urls[i] = c.url
	}
	return urls
}

// leader names the replicas that say they lead (weir_fleet_leader 1):
// one, normally.
func (f *fleetRun) leader() string {
	var ls []string
	for i, c := range f.replicas {
		if leads(c.url) {
			ls = append(ls, f.ids[i])
		}
	}
	if len(ls) == 0 {
		return "none"
	}
	return strings.Join(ls, ",")
}

// leads reports whether the gateway at url says it leads its fleet.
func leads(url string) bool {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "weir_fleet_leader "); ok {
			return strings.TrimSpace(v) == "1"
		}
	}
	return false
}

// warnings sums the replicas' warnings, by replica; "" if none.
func (f *fleetRun) warnings() string {
	var parts []string
	for i, c := range f.replicas {
		if w := c.warnings(); w != "" {
			parts = append(parts, f.ids[i]+": "+w)
		}
	}
	return strings.Join(parts, "; ")
}

// stop stops the replicas, the last started first, and drops the schema.
func (f *fleetRun) stop() {
	for i := len(f.replicas) - 1; i >= 0; i-- {
		f.replicas[i].stop()
	}
	if f.schema != nil {
		if err := f.schema.drop(); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		}
	}
}

// startSQLiteServe starts one `weir serve` child on a new SQLite file in
// dir, with key k created in it first: the fleet's baseline, Weir as one
// process with its memory engine.
func startSQLiteServe(ctx context.Context, w Weir, dir, server, rest string, k *weir.APIKey) (*child, string, error) {
	return startSQLiteServeFile(ctx, w, dir, serveFile{Server: server, Rest: rest}, k)
}

// startSQLiteServeFile is startSQLiteServe from file (its storage set
// here).
func startSQLiteServeFile(ctx context.Context, w Weir, dir string, file serveFile, k *weir.APIKey) (*child, string, error) {
	db := filepath.Join(dir, "serve.db")
	path := filepath.Join(dir, "serve.yaml")
	file.Storage = sqliteStorage(db)
	if err := file.write(path); err != nil {
		return nil, "", err
	}
	store, err := sqlite.Open(ctx, db)
	if err != nil {
		return nil, "", err
	}
	secret, err := w.CreateKey(ctx, store, k)
	_ = store.Close()
	if err != nil {
		return nil, "", err
	}
	c, err := startChild(w.Exe, append(slices.Clone(w.ServeArgs), "-c", path), 2*time.Minute, nil)
	if err != nil {
		return nil, "", fmt.Errorf("serve: %w", err)
	}
	if err := waitReady(ctx, c.url, time.Minute); err != nil {
		c.stop()
		return nil, "", fmt.Errorf("serve: %w", err)
	}
	return c, secret, nil
}

// cpuTime is the user plus system CPU time process pid has used, from
// /proc/<pid>/stat (Linux; 0 elsewhere), in clock ticks of 10 ms.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command's name, in parentheses, may hold spaces: fields count
	// from after its closing one, where the state is field 3.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, _ := strconv.ParseInt(f[12], 10, 64) // field 15
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
