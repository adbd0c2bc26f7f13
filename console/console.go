package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/adminauth"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/gateway"
)

// Config tunes the console.
type Config struct {
	// AdminToken, when set, is what the login form asks for (and what a
	// bearer token must be); when empty, only loopback clients get in,
	// and only if Loopback says so. The admin API's setting. Default "".
	AdminToken string
	// Loopback lets loopback clients in without a token when AdminToken
	// is empty (server.admin_loopback), if their requests name a loopback
	// host or PublicURL's (adminauth.TrustedHost). Default false.
	Loopback bool
	// DefaultGroup is the group of a key created without one. Default
	// "default".
	DefaultGroup string
	// SessionTTL is how long a login lasts. Default 12h.
	SessionTTL time.Duration
	// Interval is how often a snapshot is taken and pushed. Default 1s.
	Interval time.Duration
	// Window is how much history the charts keep, at one point per
	// Interval. Default 15m; never less than one Interval.
	Window time.Duration
	// MaxClients bounds the live streams at once; past it a page is told
	// to come back later. Default 32.
	MaxClients int
	// WriteTimeout bounds one write to a stream's client; a client that
	// takes longer is dropped (its page reconnects). Default 10s.
	WriteTimeout time.Duration
	// PublicURL is the base URL the console's users reach it by
	// (server.public_url), when a proxy stands in front: an https one
	// makes the session cookie Secure (the proxy ends TLS, so this
	// process sees plain http); its origin is accepted as the page's
	// Origin, and its host, while loopback alone vouches for clients, as
	// the Host. Default "": none.
	PublicURL string
}

func (c *Config) defaults() {
	if c.DefaultGroup == "" {
		c.DefaultGroup = "default"
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = 12 * time.Hour
	}
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.Window <= 0 {
		c.Window = 15 * time.Minute
	}
	c.Window = max(c.Window, c.Interval)
	if c.MaxClients <= 0 {
		c.MaxClients = 32
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 10 * time.Second
	}
}

// KeyStore is what the keys view uses of the store; weir.Store
// implements it.
type KeyStore interface {
	KeyCreate(ctx context.Context, k weir.APIKey) error
	KeyList(ctx context.Context) ([]weir.APIKey, error)
	KeyByID(ctx context.Context, id string) (weir.APIKey, error)
	KeyRevoke(ctx context.Context, p *weir.KeyRevokeParams) error
	UsageByKey(ctx context.Context, since time.Time) ([]weir.KeyUsage, error)
}

// Deps are the data sources the console shows and acts through: the same
// ones the admin API reads.
type Deps struct {
	// Gateway is what the views show (gateway.Service), and Operator
	// what the actions change (gateway.Service).
	Gateway  Gateway
	Operator Operator
	// Tasks is the task front (gateway.Tasks); nil: no tasks view.
	Tasks Tasks
	Keys  KeyStore
	// Spend reports spend for the spend view; nil: the view says the
	// gateway keeps none. Budgets are the budgets it shows spend
	// against; nil: none.
	Spend   Spend
	Budgets Budgets
	// Nodes lists the edge nodes (edge.Hub.Nodes); nil: none.
	Nodes func(ctx context.Context) []weir.NodeView
	// Fleet describes the fleet, JSON-encodable; nil outside a fleet.
	Fleet func(ctx context.Context) any
	// Recorder counts waits and usage on the request path; it must be the
	// one the gateway's metrics, the engine's observer and the usage
	// records feed. Default: a fresh one (the charts stay empty).
	Recorder *Recorder
	// Metrics counts logins; default none.
	Metrics Metrics
	Clock   clock.Clock
	Logger  *slog.Logger
}

// Metrics receives the console's counts; metrics.Metrics implements it.
type Metrics interface {
	// ConsoleLogin counts a login by outcome: ok or failed.
	ConsoleLogin(outcome string)
}

type noMetrics struct{}

func (noMetrics) ConsoleLogin(string) {}

// Console is the web console and its live stream.
type Console struct {
	cfg  Config
	deps Deps

	token    adminauth.Token
	csrfKey  [32]byte
	sessions *sessions
	logins   *loginGuard
	names    *keyNames
	// public is Config.PublicURL's scheme and host (no default port,
	// lower case); empty when there is none.
	public url.URL

	mu       sync.Mutex
	ring     *ring
	seq      uint64
	frame    []byte // the newest snapshot event, encoded
	clients  map[*client]struct{}
	timer    clock.Timer
	stopped  bool
	counts   map[string]secondCounts
	lastFail map[string]uint64
}

// client is one live stream: the newest frame waiting to be written. A
// frame is a whole snapshot, so a client that has not taken the last one
// gets the newer in its place (and the chart points in between when it
// writes, from the ring): nothing queues behind a slow client.
type client struct {
	ch chan frame
}

type frame struct {
	seq  uint64
	data []byte
}

// New returns a Console; Start begins its sampling.
func New(cfg Config, deps Deps) *Console {
	cfg.defaults()
	if deps.Clock == nil {
		deps.Clock = clock.Real
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Recorder == nil {
		deps.Recorder = NewRecorder()
	}
	if deps.Metrics == nil {
		deps.Metrics = noMetrics{}
	}
	c := &Console{
		cfg: cfg, deps: deps,
		token:    adminauth.NewToken(cfg.AdminToken),
		sessions: &sessions{clock: deps.Clock, ttl: cfg.SessionTTL, byID: make(map[[sha256.Size]byte]time.Time)},
		logins:   newLoginGuard(deps.Clock),
		names:    &keyNames{keys: deps.Keys, clock: deps.Clock, logger: deps.Logger},
		public:   publicOrigin(cfg.PublicURL),
		ring:     newRing(int(cfg.Window / cfg.Interval)),
		clients:  make(map[*client]struct{}),
		counts:   make(map[string]secondCounts),
	}
	_, _ = rand.Read(c.csrfKey[:])
	return c
}

// publicOrigin is the scheme and host of raw, an absolute http or https
// URL, with a default port left out as a browser's Origin leaves it out;
// the zero URL if raw is none (the config has refused a malformed one).
func publicOrigin(raw string) url.URL {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return url.URL{}
	}
	host := strings.ToLower(u.Host)
	if p := u.Port(); (u.Scheme == "https" && p == "443") || (u.Scheme == "http" && p == "80") {
		host = strings.TrimSuffix(host, ":"+p)
	}
	return url.URL{Scheme: u.Scheme, Host: host}
}

// Start takes the first snapshot and samples every Interval after.
func (c *Console) Start(ctx context.Context) error {
	c.tick()
	return nil
}

// Stop ends sampling; live streams end with their requests.
func (c *Console) Stop(context.Context) error {
	c.mu.Lock()
	c.stopped = true
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	return nil
}

// tick samples once and arms the next tick.
func (c *Console) tick() {
	c.sample(context.Background())
	c.mu.Lock()
	if !c.stopped {
		c.timer = c.deps.Clock.AfterFunc(c.cfg.Interval, c.tick)
	}
	c.mu.Unlock()
}

// Snapshot is what a stream's snapshot event carries: the state now, and
// the newest chart point.
type Snapshot struct {
	Seq    uint64     `json:"seq"`
	T      int64      `json:"t"`
	Models []ModelRow `json:"models"`
	// Shared are the scopes several models' candidates use, each once.
	Shared []SharedRow `json:"shared"`
	// Requests counts the requests waiting and in flight, each once.
	Requests gateway.Requests     `json:"requests"`
	Scopes   []gateway.ScopeView  `json:"scopes"`
	Nodes    []weir.NodeView      `json:"nodes"`
	Fleet    any                  `json:"fleet,omitempty"`
	Paused   map[string]time.Time `json:"paused"`
	// Failed is the running count since start of waiters that left
	// without a lease, by outcome.
	Failed map[string]uint64 `json:"failed"`
	Point  Point             `json:"point"`
	// Hidden counts idle per-key scopes left out of Scopes.
	Hidden int `json:"hidden_scopes,omitempty"`
	// KeyNames are the names of the keys whose scopes Scopes lists, by
	// id (a key without a name is left out).
	KeyNames map[string]string `json:"key_names,omitempty"`
}

// ModelRow is one model in the overview: now, and over the window.
type ModelRow struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Scopes are the scopes of its candidates (platform models, node
	// providers) that no other model's candidates use: InFlight, Limit
	// and Queued add up these.
	Scopes []string `json:"scopes"`
	// Shares are the scopes of its candidates that other models' use too
	// (a node provider that serves several models, a platform model two
	// models list): each is counted once, in Snapshot.Shared, for whoever
	// uses it, and not here.
	Shares   []string `json:"shares,omitempty"`
	InFlight int64    `json:"in_flight"`
	Limit    int64    `json:"limit"` // 0: one of them is unlimited, or it has none of its own
	// Queued is the most waiting on any one of its scopes (a waiter
	// counts in each of its candidates' scopes).
	Queued         int     `json:"queued"`
	Paused         bool    `json:"paused,omitempty"`
	AdmittedPerSec float64 `json:"admitted_per_s"`
	// P50, P99 and QueuedAdmitted are over the window.
	P50            float64 `json:"p50_ms"`
	P99            float64 `json:"p99_ms"`
	QueuedAdmitted uint64  `json:"queued_admitted"`
}

// SharedRow is a scope that several models' candidates use, counted
// once: its waiters and leases may be any of those models'.
type SharedRow struct {
	Scope    string   `json:"scope"`
	Models   []string `json:"models"`
	InFlight int64    `json:"in_flight"`
	Limit    int64    `json:"limit"` // 0: unlimited
	Queued   int      `json:"queued"`
	Paused   bool     `json:"paused,omitempty"`
}

// maxKeyScopes is how many per-key scopes a snapshot lists before it
// leaves out the idle ones.
const maxKeyScopes = 200

// sample takes a snapshot: it drains the recorder's counts into a chart
// point, reads the scopes, nodes and fleet, and pushes the encoded
// snapshot to every live stream.
func (c *Console) sample(ctx context.Context) {
	now := c.deps.Clock.Now()
	scopes := c.deps.Gateway.Scopes(ctx)
	nodes := c.nodes(ctx)
	byName := make(map[string]gateway.ScopeView, len(scopes))
	for _, s := range scopes {
		byName[s.Name] = s
	}
	clear(c.counts)
	c.deps.Recorder.take(c.counts)
	fail := c.deps.Recorder.failures()

	snap := Snapshot{T: now.UnixMilli(), Scopes: scopes, Nodes: nodes, Paused: c.deps.Gateway.Paused(), Failed: fail, Models: []ModelRow{}, Shared: []SharedRow{}}
	if c.deps.Fleet != nil {
		snap.Fleet = c.deps.Fleet(ctx)
	}
	pt := Point{T: now.UnixMilli(), Models: make(map[string]ModelPoint), bins: make(map[string]*[waitBins]uint32)}
	if st := c.deps.Gateway.Snapshot(); st != nil {
		snap.Models, snap.Shared = c.modelRows(st, nodes, byName, &pt)
	}
	snap.Requests = gateway.CountRequests(scopes)
	snap.Scopes, snap.Hidden = trimKeyScopes(scopes)
	snap.KeyNames = c.names.of(ctx, keyIDsOf(snap.Scopes))
	c.publish(snap, pt, fail)
}

// nodes are the edge nodes now, none (not nil) if there are none.
func (c *Console) nodes(ctx context.Context) []weir.NodeView {
	var nodes []weir.NodeView
	if c.deps.Nodes != nil {
		nodes = c.deps.Nodes(ctx)
	}
	if nodes == nil {
		nodes = []weir.NodeView{}
	}
	return nodes
}

// modelRows are the overview's rows of st's models and the scopes that
// several of them share; each model's chart point goes into pt. byName
// are the scopes now, by name.
func (c *Console) modelRows(st *gateway.Snapshot, nodes []weir.NodeView, byName map[string]gateway.ScopeView, pt *Point) ([]ModelRow, []SharedRow) {
	names := st.ModelNames()
	scopesOf := make(map[string][]string, len(names))
	usedBy := make(map[string][]string)
	for _, name := range names {
		m, _ := st.Model(name)
		scopesOf[name] = modelScopes(m, nodes)
		for _, sc := range scopesOf[name] {
			usedBy[sc] = append(usedBy[sc], name)
		}
	}
	rows := []ModelRow{}
	for _, name := range names {
		m, _ := st.Model(name)
		row := modelRow(name, m.Kind, scopesOf[name], usedBy, byName)
		mp := c.modelPoint(row, pt)
		pt.Models[name] = mp
		row.AdmittedPerSec = float64(mp.Admitted) / c.cfg.Interval.Seconds()
		rows = append(rows, row)
	}
	return rows, sharedRows(usedBy, byName)
}

// modelRow is the model name's row now: it adds up the scopes (scopes)
// that no other model uses (usedBy says who uses each) and lists the
// others as its shares.
func modelRow(name string, kind weir.ModelKind, scopes []string, usedBy map[string][]string, byName map[string]gateway.ScopeView) ModelRow {
	row := ModelRow{Name: name, Kind: string(kind), Scopes: []string{}}
	unlimited := false
	for _, sc := range scopes {
		if len(usedBy[sc]) > 1 {
			row.Shares = append(row.Shares, sc)
			continue
		}
		row.Scopes = append(row.Scopes, sc)
		v, ok := byName[sc]
		if !ok {
			continue
		}
		row.InFlight += v.InFlight
		row.Limit += v.Limit
		unlimited = unlimited || v.Limit == 0
		row.Queued = max(row.Queued, v.Waiting)
		row.Paused = row.Paused || v.Paused
	}
	if unlimited {
		row.Limit = 0
	}
	return row
}

// modelPoint is row's model in the chart point pt: its state now and
// what the recorder counted for it since the last sample, whose queue
// wait bins go into pt.
func (c *Console) modelPoint(row ModelRow, pt *Point) ModelPoint {
	mp := ModelPoint{InFlight: row.InFlight, Limit: row.Limit, Queued: row.Queued}
	sc, ok := c.counts[row.Name]
	if !ok {
		return mp
	}
	mp.Admitted, mp.QueuedAdmitted = sc.admitted, sc.queued
	if sc.bins != nil {
		pt.bins[row.Name] = sc.bins
		var b [waitBins]uint64
		for i, n := range sc.bins {
			b[i] = uint64(n)
		}
		mp.P50, mp.P99 = quantile(&b, 0.5), quantile(&b, 0.99)
	}
	return mp
}

// keyIDsOf are the ids of the keys whose per-key scopes scopes lists.
func keyIDsOf(scopes []gateway.ScopeView) []string {
	var ids []string
	for _, v := range scopes {
		if id, ok := weir.KeyOfScope(v.Name); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// publish files pt in the chart, numbered, with the waiters that failed
// since the last sample (fail is their running count), and sends snap,
// with pt and each model's window, to every live stream.
func (c *Console) publish(snap Snapshot, pt Point, fail map[string]uint64) {
	c.mu.Lock()
	pt.Failed = c.failedSinceLocked(fail)
	c.seq++
	pt.Seq = c.seq
	c.ring.push(pt)
	for i := range snap.Models {
		r := &snap.Models[i]
		r.P50, r.P99, r.QueuedAdmitted = c.ring.window(r.Name)
	}
	snap.Seq, snap.Point = c.seq, pt
	data, err := json.Marshal(snap)
	if err != nil {
		c.mu.Unlock()
		c.deps.Logger.Warn("console snapshot could not be encoded", "error", err)
		return
	}
	f := frame{seq: c.seq, data: data}
	c.frame = data
	for cl := range c.clients {
		offer(cl, f)
	}
	c.mu.Unlock()
}

// failedSinceLocked is, by outcome, how many waiters left without a lease
// since the last sample (nil if none), fail being their running count
// now; it keeps fail for the next.
func (c *Console) failedSinceLocked(fail map[string]uint64) map[string]uint64 {
	var since map[string]uint64
	if c.lastFail != nil {
		for o, n := range fail {
			if d := n - c.lastFail[o]; d > 0 {
				if since == nil {
					since = make(map[string]uint64)
				}
				since[o] = d
			}
		}
	}
	c.lastFail = fail
	return since
}

// offer gives cl the newest frame in place of one it has not taken.
func offer(cl *client, f frame) {
	select {
	case cl.ch <- f:
		return
	default:
	}
	select {
	case <-cl.ch:
	default:
	}
	select {
	case cl.ch <- f:
	default:
	}
}

// modelScopes are the scopes of m's candidates, each once: its platform
// models', and those of the edge providers that serve it.
func modelScopes(m weir.Model, nodes []weir.NodeView) []string {
	var out []string
	add := func(sc string) {
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	for _, cd := range m.Candidates {
		add(weir.PlatformModelScope(cd.PlatformModel))
	}
	for _, n := range nodes {
		for _, p := range n.Providers {
			if slices.Contains(p.Models, m.Name) {
				add(weir.NodeScope(n.ID, p.ID))
			}
		}
	}
	return out
}

// sharedRows are the scopes that more than one model uses, by name.
func sharedRows(usedBy map[string][]string, byName map[string]gateway.ScopeView) []SharedRow {
	out := []SharedRow{}
	for sc, models := range usedBy {
		if len(models) < 2 {
			continue
		}
		row := SharedRow{Scope: sc, Models: models}
		if v, ok := byName[sc]; ok {
			row.InFlight, row.Limit, row.Queued, row.Paused = v.InFlight, v.Limit, v.Waiting, v.Paused
		}
		out = append(out, row)
	}
	slices.SortFunc(out, func(a, b SharedRow) int { return strings.Compare(a.Scope, b.Scope) })
	return out
}

// trimKeyScopes leaves out idle per-key scopes when there are many.
func trimKeyScopes(scopes []gateway.ScopeView) ([]gateway.ScopeView, int) {
	keyPrefix := weir.KeyScope("")
	n := 0
	for _, s := range scopes {
		if strings.HasPrefix(s.Name, keyPrefix) {
			n++
		}
	}
	if n <= maxKeyScopes {
		if scopes == nil {
			scopes = []gateway.ScopeView{}
		}
		return scopes, 0
	}
	out := make([]gateway.ScopeView, 0, len(scopes)-n)
	hidden := 0
	for _, s := range scopes {
		if strings.HasPrefix(s.Name, keyPrefix) && s.InFlight == 0 && s.Waiting == 0 {
			hidden++
			continue
		}
		out = append(out, s)
	}
	return out, hidden
}
