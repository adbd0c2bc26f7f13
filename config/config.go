package config

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/gcfloor"
)

// Config is the whole config file.
type Config struct {
	// Server holds the HTTP server and request-path settings.
	Server Server `yaml:"server"`
	// Storage says where keys and usage are kept.
	Storage Storage `yaml:"storage"`
	// Fleet is how a replica on PostgreSQL joins the others sharing its
	// database; sqlite ignores it.
	Fleet Fleet `yaml:"fleet"`
	// Edge is where edge nodes (weir node) dial in.
	Edge Edge `yaml:"edge"`
	// Tasks runs durable asynchronous tasks (the video and task APIs).
	Tasks Tasks `yaml:"tasks"`
	// Spend says where budget alerts go.
	Spend Spend `yaml:"spend"`
	// Platforms are the upstream accounts. Default: none.
	Platforms []Platform `yaml:"platforms"`
	// PlatformModels are the models on each platform, with their limits.
	// Default: none.
	PlatformModels []PlatformModel `yaml:"platform_models"`
	// Models are the public model names clients ask for. Default: none.
	Models []Model `yaml:"models"`
	// Groups are classes of keys with their own limits and priority.
	// Default: none (but see DefaultGroup).
	Groups []Group `yaml:"groups"`
	// Budgets are amounts that groups, models, platform models and keys
	// may spend per window. Default: none.
	Budgets []Budget `yaml:"budgets"`
	// DefaultGroup is the group a key gets when created without one. If
	// Groups does not define it, a group of that name with no limits exists
	// implicitly. Default "default".
	DefaultGroup string `yaml:"default_group"`
}

// Server is the HTTP server and the request path.
type Server struct {
	// Listen is the address the HTTP API listens on. Default "127.0.0.1:8080".
	Listen string `yaml:"listen"`
	// MaxBodyBytes is the largest request body accepted; a larger one gets
	// 413 before it is parsed. Default 10485760 (10 MiB).
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxUploadBytes is the largest multipart upload accepted (image
	// edits and variations, transcriptions, translations), the form
	// whole; a larger one gets 413 before it is read. 0: the HTTP API's
	// default, 26 MiB (a 25 MB file, OpenAI's bound on audio, with its
	// fields).
	MaxUploadBytes int64 `yaml:"max_upload_bytes"`
	// DefaultMaxWait is how long a request may wait in the queue when
	// neither the request nor a scope's max_wait says less. 0: no default
	// cap (NoBound once parsed). Default (unset) 30s, the HTTP API's.
	DefaultMaxWait time.Duration `yaml:"default_max_wait"`
	// ShutdownTimeout is how long a graceful shutdown waits for in-flight
	// requests to drain. Default 30s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// ReadHeaderTimeout bounds the reading of a request's headers; a
	// client slower than that is disconnected. Default 30s.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// BodyTimeout bounds the reading of a request's body; a body slower
	// than that is cut off with 408 request_timeout. It does not bound the
	// answer (a long stream runs to its end). Default 60s.
	BodyTimeout time.Duration `yaml:"body_timeout"`
	// IdleTimeout is how long a keep-alive connection may wait for its
	// next request before it is closed. Default 120s.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// RetryBudget is the most upstream attempts one request makes across its
	// candidates (the first attempt counts). Default 3.
	RetryBudget int `yaml:"retry_budget"`
	// Cooldown takes a failing candidate out of rotation for a while.
	Cooldown Cooldown `yaml:"cooldown"`
	// UpstreamTimeout bounds the wait for an upstream's response headers,
	// for platforms that set no timeout of their own; past it the call
	// moves to the next candidate, or the client gets upstream_timeout.
	// 0: no bound (NoBound once parsed). Default (unset) 120s, the
	// gateway's.
	UpstreamTimeout time.Duration `yaml:"upstream_timeout"`
	// UpstreamIdleTimeout bounds each wait for more of an upstream's
	// answer once its headers are in (the gap between a stream's chunks),
	// for platforms that set no idle_timeout of their own. 0: no bound
	// (NoBound once parsed). Default (unset) 120s, the gateway's.
	UpstreamIdleTimeout time.Duration `yaml:"upstream_idle_timeout"`
	// UpstreamCallTimeout bounds one upstream call whole, from sending it
	// to the end of its answer, for platforms that set no call_timeout of
	// their own. 0: no bound (NoBound once parsed). Default (unset) 10m,
	// the gateway's.
	UpstreamCallTimeout time.Duration `yaml:"upstream_call_timeout"`
	// StreamWriteTimeout is how long one write of an answer to a client
	// may block (each chunk of a stream, each piece of a body); a client
	// that stops reading loses its answer after it, and its upstream call
	// and capacity are let go. 0: no bound (NoBound once parsed). Default
	// (unset) 30s, the HTTP API's.
	StreamWriteTimeout time.Duration `yaml:"stream_write_timeout"`
	// MaxResponseBytes bounds an upstream answer the gateway reads whole
	// (a JSON answer; streams and other bodies pass through as they
	// arrive); a larger one gets upstream_error. Default 67108864 (64 MiB).
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
	// LogLevel is the slog level: debug, info, warn or error. Default "info".
	LogLevel string `yaml:"log_level"`
	// AccessLog logs one line per request once it is answered, at info
	// (probes' and scrapes' at debug): its id, key name, model,
	// candidate, waits, status, tokens and trace id, never its prompt or
	// a secret (docs/observability.md). Default true.
	AccessLog bool `yaml:"access_log"`
	// AdminToken is the bearer token for the /admin endpoints (and
	// /metrics with MetricsAuth). When set, it is required from every
	// client, loopback ones included. Default "".
	AdminToken string `yaml:"admin_token"`
	// AdminLoopback says whether, with no AdminToken, loopback clients may
	// use the admin API without a token: "true", "false", or "auto", which
	// is true when Listen is a loopback address (127.0.0.1, ::1,
	// localhost) and false otherwise. Behind a reverse proxy on the same
	// host every client looks like a loopback client: set an admin token
	// there. With no token and no loopback trust the admin API answers
	// 403. Default "auto".
	AdminLoopback string `yaml:"admin_loopback"`
	// PublicURL is the base URL clients reach the gateway by when it is
	// not the listen address: a reverse proxy's, say
	// "https://weir.example.com". With https, the console's session
	// cookie is Secure even though the proxy ends TLS; its origin is the
	// console page's own; and while loopback trust alone lets clients in,
	// its host is accepted in the Host header besides the loopback names
	// (127.0.0.1, [::1], localhost), which are all that is accepted
	// otherwise, against DNS rebinding. An http or https URL with no path
	// beyond "/". Default "": none.
	PublicURL string `yaml:"public_url"`
	// MetricsAuth puts /metrics behind the admin API's guard (the admin
	// token, or loopback trust as AdminLoopback says). Default false:
	// /metrics is open, as most Prometheus scrapers expect.
	MetricsAuth bool `yaml:"metrics_auth"`
	// MetricsSpendByKey adds a key label (the key's id) to
	// weir_spend_total and shows keys' budgets in the weir_budget_*
	// gauges: one series per key, which suits a gateway with few keys.
	// Default false: spend by group, model and platform model, and no
	// key's budget.
	MetricsSpendByKey bool `yaml:"metrics_spend_by_key"`
	// MaxEndUserBudgets bounds the end users whose budgets of every end
	// user (user:*) this process keeps a scope of (gateway.Config).
	// Default 10000.
	MaxEndUserBudgets int `yaml:"max_end_user_budgets"`
	// UsageFlushInterval is how often buffered usage records are written to
	// storage. Default 1s.
	UsageFlushInterval time.Duration `yaml:"usage_flush_interval"`
	// KeyCacheTTL is how long a looked-up API key is trusted before the
	// store is asked again: a revoked key is refused within it. Default 2s.
	KeyCacheTTL time.Duration `yaml:"key_cache_ttl"`
	// HeapFloor is the heap, in bytes, below which the garbage collector
	// does not start a cycle: with a small live heap, GOGC is raised so
	// that the heap grows to this between cycles (package gcfloor). It
	// collects less often, which can shorten a streamed chunk's latency
	// tail, and the process then keeps about this much memory for its
	// heap. Default 0: none, GOGC as it is. GOGC set in the environment
	// turns it off.
	HeapFloor int64 `yaml:"heap_floor"`
}

// AdminLoopbackTrusted reports whether loopback clients may use the admin
// API without a token, as AdminLoopback says (resolving "auto" from
// Listen). It says nothing when AdminToken is set: the token is required.
func (s *Server) AdminLoopbackTrusted() bool {
	switch s.AdminLoopback {
	case "true":
		return true
	case "false":
		return false
	}
	host, _, err := net.SplitHostPort(s.Listen)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// Cooldown is when and for how long a failing candidate is skipped.
type Cooldown struct {
	// Failures is how many consecutive failures put a candidate in
	// cooldown. 0 disables cooldown. Default 3.
	Failures int `yaml:"failures"`
	// Duration is how long a candidate stays in cooldown before it is tried
	// again. Default 30s.
	Duration time.Duration `yaml:"duration"`
}

// Tasks tunes durable asynchronous tasks.
type Tasks struct {
	// Workers is how many tasks run at once across every platform: the
	// global worker-capacity scope. Default 100.
	Workers int `yaml:"workers"`
	// QueueLimit bounds the backlog: the tasks waiting in the queue at
	// once across every platform. A submission past it is refused with
	// 429 queue_full, and nothing is stored. Default 10000.
	QueueLimit int `yaml:"queue_limit"`
	// MaxWait is how long a task may stay queued before it expires.
	// Default 24h.
	MaxWait time.Duration `yaml:"max_wait"`
	// PollMin is the first wait between polls of a running upstream job;
	// it doubles as the job runs. Default 250ms.
	PollMin time.Duration `yaml:"poll_min"`
	// PollMax caps the wait between polls. Default 10s.
	PollMax time.Duration `yaml:"poll_max"`
	// MaxAttempts is how many times a task-specific upstream failure is
	// tried before the task fails for good. Default 5.
	MaxAttempts int `yaml:"max_attempts"`
	// LeaseTTL is how long a running task's capacity is held without its
	// worker renewing it. Default 5m.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// RescueAfter is how long a task's job may look running before it is
	// handed to another worker (its process died). Default 2m.
	RescueAfter time.Duration `yaml:"rescue_after"`
	// Retention is how long a finished task is kept (for GET, listings
	// and its Idempotency-Key) before it is removed for good. Default
	// 720h (30 days).
	Retention time.Duration `yaml:"retention"`
	// WebhookSecret signs callback events (Standard Webhooks, "whsec_..."
	// as made by any Standard Webhooks library). Empty: tasks may not ask
	// for callbacks. Default "".
	WebhookSecret string `yaml:"webhook_secret"`
	// WebhookAllowLoopback lets callbacks reach loopback addresses (for
	// tests and local development only). Default false.
	WebhookAllowLoopback bool `yaml:"webhook_allow_loopback"`
	// WebhookAllowPrivate lets callbacks reach private-network addresses.
	// Default false.
	WebhookAllowPrivate bool `yaml:"webhook_allow_private"`
	// WebhookPerKey is how many callback deliveries of one API key's
	// tasks are in flight at once; the key's others wait their turn, so
	// that a key whose receivers are slow holds at most this many of the
	// 32 delivery workers. 0: the default, 8.
	WebhookPerKey int `yaml:"webhook_per_key"`
	// DefaultCallbackURL receives the terminal event (task.succeeded,
	// task.failed, ...) of every task submitted without a callback URL
	// of its own, signed with WebhookSecret (required with it). It is the
	// operator's receiver: it may be on a private network or loopback.
	// Default "": none.
	DefaultCallbackURL string `yaml:"default_callback_url"`
}

// Storage is where durable things are kept.
type Storage struct {
	// Driver is the database: "sqlite" (embedded, one file) or
	// "postgres". Default "sqlite".
	Driver string `yaml:"driver"`
	// Path is the SQLite database file; the postgres driver ignores it.
	// Default "weir.db".
	Path string `yaml:"path"`
	// DSN is the PostgreSQL database, as a URL
	// (postgres://user:password@host:5432/db?sslmode=require) or
	// key=value pairs (host=... dbname=...); required by the postgres
	// driver, ignored by sqlite. Default "".
	DSN string `yaml:"dsn"`
}

// Fleet is how a replica on PostgreSQL joins the others sharing its
// database. Several `weir serve` replicas on one database (storage driver
// postgres) form a fleet: one of them leads admission and the others reach
// it over its fleet listener. The sqlite driver ignores this section.
type Fleet struct {
	// Replica is this replica's id in the fleet: at most 100 bytes, no
	// whitespace or control characters. Default "": <hostname>-<port>,
	// the port of server.listen, so that a restart is the same replica
	// again (it supersedes its previous run); with port 0, a random
	// suffix instead of the port, a new id at each start.
	Replica string `yaml:"replica"`
	// Listen is the address of the fleet listener, where the other
	// replicas reach this one while it leads. Default "": the host of
	// server.listen, on a free port (Config.FleetListen), so that a
	// replica whose API listens on loopback keeps its fleet port there
	// too; ":0" is every interface.
	Listen string `yaml:"listen"`
	// Advertise is the address, host:port, the other replicas dial to
	// reach this one's fleet listener. Set it when they reach this host by
	// another name or through another port. Default "": the listener's
	// address, or this host's name with the listener's port when it
	// listens on every interface.
	Advertise string `yaml:"advertise"`
	// RelayAdvertise is the base URL (http://host:port or https://...)
	// at which the other replicas reach this replica's HTTP API, to relay
	// runs to the edge nodes that dialed it (edge.listen): a node serves
	// the whole fleet whichever replica it dialed. Default "": http://,
	// this host's name and the port the API listens on.
	RelayAdvertise string `yaml:"relay_advertise"`
	// Secret is shared by the fleet's replicas and authenticates them to
	// each other: at least 16 bytes. Default "": the replicas use one kept
	// in their database.
	Secret string `yaml:"secret"`
	// TermTTL is how long the leader's term runs without a renewal; a
	// leader that dies is replaced within about this long. The leader
	// renews every third of it. At least 1s. Default 10s.
	TermTTL time.Duration `yaml:"term_ttl"`
	// HeartbeatTimeout is how old a replica's heartbeat may get before the
	// fleet takes it for gone; it also bounds a replica's session with the
	// leader. A replica heartbeats every third of it. At least 1s.
	// Default 6s.
	HeartbeatTimeout time.Duration `yaml:"heartbeat_timeout"`
	// Poll is how often a replica re-reads the term when no notice of a
	// change has come: the safety net under PostgreSQL's LISTEN. Positive
	// and at most TermTTL. Default 5s.
	Poll time.Duration `yaml:"poll"`
	// Unavailable is what the platform models and groups that do not say
	// (their fail_open) do while no leader answers — PostgreSQL is
	// unreachable, or the leader is gone — for longer than a failover
	// takes (term_ttl plus twice heartbeat_timeout): "closed", admit
	// nothing (store_unavailable 503), or "open", each replica admits
	// its share of each limit (the limit divided by the replicas alive,
	// rounded down). Work already admitted runs on either way. It is
	// part of the fleet's catalog (CatalogDocument): every replica takes
	// the published version's, whatever its own file says. Default
	// "closed".
	Unavailable string `yaml:"unavailable"`
	// ReleaseSilent says when the fleet gives back the capacity held by
	// a replica that went silent — paused, stalled or cut off, with no
	// proof that its process died (one whose process died gives it back
	// at once): "call_timeout", once each of its calls is surely over
	// (its platform's call_timeout, or server.upstream_call_timeout,
	// from its admission, and heartbeat_timeout more; never, for a call
	// without one), or as soon as the replica comes back and says which
	// ended; or "heartbeat", once it has been silent for
	// heartbeat_timeout, knowing that its calls may still run upstream
	// and a limit be exceeded until they end. Default "call_timeout".
	ReleaseSilent string `yaml:"release_silent"`
}

// FleetListen is the address the fleet listener listens on:
// fleet.listen, or, when it is empty, the host of server.listen on a free
// port (every interface when server.listen names none).
func (c *Config) FleetListen() string {
	if c.Fleet.Listen != "" {
		return c.Fleet.Listen
	}
	host, _, err := net.SplitHostPort(c.Server.Listen)
	if err != nil {
		// server.listen is validated as host:port; should it not be,
		// loopback is the safe side.
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, "0")
}

// Fleet.Unavailable's values.
const (
	UnavailableClosed = "closed"
	UnavailableOpen   = "open"
)

// Fleet.ReleaseSilent's values.
const (
	ReleaseSilentCallTimeout = "call_timeout"
	ReleaseSilentHeartbeat   = "heartbeat"
)

// Edge is the gateway's listener for its edge nodes: machines with
// their own model runtimes that run `weir node` and dial in (gRPC). Their
// providers' slots become scopes, and candidates of the models they
// serve (see models[].nodes).
type Edge struct {
	// Listen is the address of the edge listener. Default "": off, no
	// node can dial in.
	Listen string `yaml:"listen"`
	// TLSCert and TLSKey are PEM files of the listener's certificate and
	// key; both or neither. Default "": plaintext, for loopback and
	// private networks (node tokens cross it in the clear).
	TLSCert string `yaml:"tls_cert"`
	TLSKey  string `yaml:"tls_key"`
	// HeartbeatInterval is how often nodes are told to heartbeat.
	// Default 2s.
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	// HeartbeatTimeout is how long a node may go without a heartbeat,
	// by the gateway's clock, before it is declared gone: its leases are
	// released and its waiters move to other candidates. More than
	// heartbeat_interval. Default 6s.
	HeartbeatTimeout time.Duration `yaml:"heartbeat_timeout"`
	// ForgetAfter is how long after a node is gone, with no newer session,
	// the gateway forgets it: its slots' scopes are retired and it leaves
	// /admin/nodes (weir nodes forget does it at once). Default 24h; 0:
	// never.
	ForgetAfter time.Duration `yaml:"forget_after"`
}

// Platform is one upstream account.
type Platform struct {
	// Name identifies the platform in platform_models. Required.
	Name string `yaml:"name"`
	// Kind is the adapter: "openai" (any OpenAI-compatible API), "gemini"
	// (Google's Gemini API, chat only), "azure" (Azure OpenAI: base_url is
	// the resource's endpoint, a platform model's upstream its deployment),
	// "anthropic" (Anthropic's Messages API, chat only), "bedrock"
	// (Amazon Bedrock's Converse API, chat only). Default "openai".
	Kind string `yaml:"kind"`
	// BaseURL is the API root, e.g. "https://api.openai.com/v1". Required,
	// except for bedrock, where it overrides the region's endpoint
	// (default "": the region's).
	BaseURL string `yaml:"base_url"`
	// APIKeyEnv names the environment variable holding the credential. Empty
	// or unset: no credential is sent. Default "".
	APIKeyEnv string `yaml:"api_key_env"`
	// Timeout bounds the wait for the response headers of a call to this
	// platform. 0: server.upstream_timeout. Default 0.
	Timeout time.Duration `yaml:"timeout"`
	// IdleTimeout bounds each wait for more of an answer once its headers
	// are in (the gap between a stream's chunks). 0:
	// server.upstream_idle_timeout. Default 0.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// CallTimeout bounds one call to this platform whole, answer included.
	// 0: server.upstream_call_timeout. Default 0.
	CallTimeout time.Duration `yaml:"call_timeout"`
	// Responses is how an openai or azure platform is sent a request to
	// POST /v1/responses: "native", passed through as it came (its own
	// Responses API answers), or "translate", translated to Chat
	// Completions as every other kind is (for an OpenAI-compatible server
	// without the Responses API, as many are). Default "": native.
	Responses string `yaml:"responses"`
	// APIVersion is the api-version of an azure platform's calls. Default
	// "": 2024-10-21.
	APIVersion string `yaml:"api_version"`
	// Region is a bedrock platform's AWS region, e.g. "us-east-1".
	// Required for bedrock. Default "".
	Region string `yaml:"region"`
	// AccessKeyIDEnv and SecretAccessKeyEnv name the environment variables
	// holding a bedrock platform's AWS key pair, SessionTokenEnv the one
	// holding its session token, if any. Both of the pair or neither:
	// with neither, api_key_env names a Bedrock API key, or, with no key
	// at all, the AWS SDK's default credential chain finds credentials
	// (AWS_* variables, shared files, the instance's or task's role).
	// Default "".
	AccessKeyIDEnv     string `yaml:"access_key_id_env"`
	SecretAccessKeyEnv string `yaml:"secret_access_key_env"`
	SessionTokenEnv    string `yaml:"session_token_env"`
	// TenantID, ClientID and ClientSecretEnv sign an azure platform in with
	// Microsoft Entra ID instead of a key: its service principal's tenant,
	// its application (client) id, and the name of the environment
	// variable holding its client secret. All three or none, and not with
	// api_key_env. The access token (scope
	// https://cognitiveservices.azure.com/.default) is sent as a bearer
	// token, shared by the platform's calls and fetched anew before it
	// expires. Default "".
	TenantID        string `yaml:"tenant_id"`
	ClientID        string `yaml:"client_id"`
	ClientSecretEnv string `yaml:"client_secret_env"`
	// TokenURL is the token endpoint of an azure platform's Entra ID
	// sign-in, for another cloud than Microsoft's public one (e.g.
	// https://login.microsoftonline.us/{tenant}/oauth2/v2.0/token). Default
	// "": https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token.
	TokenURL string `yaml:"token_url"`
}

// PlatformModel is one model on one platform, with its limits (see
// weir.Limits; each defaults to 0, no limit). A request past a platform
// model's queue_limit or max_wait falls back to another candidate, or gets
// queue_full or queue_timeout; one estimated to need more tokens than its
// tpm can never be served there and falls back, or gets 400
// invalid_request.
type PlatformModel struct {
	// Name identifies it in candidates, e.g. "openai-main/gpt-4o". Required.
	Name string `yaml:"name"`
	// Platform is the name of the platform serving it. Required.
	Platform string `yaml:"platform"`
	// Upstream is the model name sent to the platform. Required.
	Upstream string `yaml:"upstream"`
	// Limits are concurrency, rpm, tpm, queue_limit, max_wait, lease_ttl
	// and fairness_window, written in the entry itself, and shadow, which
	// judges them on every request but enforces none.
	weir.Limits `yaml:",inline"`
	// FailOpen says whether, on a fleet whose replicas reach no leader,
	// each replica admits requests here up to its share of these limits
	// (true) or none (false). A request fails open only if its group
	// (and its key, when the key has limits) does too. Default unset:
	// fleet.unavailable.
	FailOpen *bool `yaml:"fail_open"`
	// Capabilities are what it can serve (context_window,
	// max_output_tokens, tools, vision, json_output, streaming, sizes,
	// voices, seconds); a request that needs more goes to another
	// candidate, or is refused at once if none can take it. Default: not
	// checked.
	Capabilities weir.Capabilities `yaml:"capabilities"`
	// Simulate is how the simulator answers for it when a request runs
	// in the simulation run mode (latency, latency_jitter, error_rate,
	// max_concurrent, retry_after). Default: at once, always well.
	Simulate weir.Simulation `yaml:"simulate"`
	// Price is what its calls cost, in the operator's currency: input,
	// cached_input and output per million tokens, request per call,
	// images per image by "size/quality", "size" or "*", second per
	// second of video, characters per million characters of speech
	// input. Default: every part 0, free.
	Price weir.Price `yaml:"price"`
	// Tokenizer is the encoding its prompts are counted in, for its
	// context_window, tpm and budgets before the upstream reports usage:
	// o200k_base, cl100k_base or estimate (about four bytes a token, a
	// token a CJK character). Default: its model's, else on an openai or
	// azure platform the one its upstream name says (gpt-4o, gpt-4.1,
	// gpt-5, o1, o3, o4: o200k_base; gpt-4, gpt-3.5, text-embedding-3,
	// text-embedding-ada-002: cl100k_base), else estimate.
	Tokenizer weir.Tokenizer `yaml:"tokenizer"`
}

// Model is a public model name and the platform models that serve it.
type Model struct {
	// Name is what clients put in "model". Required.
	Name string `yaml:"name"`
	// Kind is what it serves: chat, embeddings, images, audio_speech, or
	// video (run as durable asynchronous tasks).
	// Required.
	Kind weir.ModelKind `yaml:"kind"`
	// Candidates are the platform models that can serve it. At least one,
	// unless edge nodes serve it (nodes is not never; not for video).
	Candidates []Candidate `yaml:"candidates"`
	// Nodes places the edge nodes' providers serving the model among its
	// candidates: first (before the platform models), last (as their
	// fallback) or never. Default first.
	Nodes weir.NodesOrder `yaml:"nodes"`
	// Affinity keeps requests that share a prompt prefix (or a
	// prompt_cache_key, or a user) on the candidate that served the last
	// of them, for its prompt cache: off, prefer (it first, when it has
	// room) or strict (only it, for up to affinity_wait). Default off.
	Affinity weir.Affinity `yaml:"affinity"`
	// AffinityWait is how long a strict affinity waits for its candidate
	// before any may serve. Default 2s.
	AffinityWait time.Duration `yaml:"affinity_wait"`
	// NodePrice is what a call of it served by an edge node's provider
	// costs, as a platform model's price: nodes register their providers
	// themselves, so the gateway prices them by model. Default: every
	// part 0, free.
	NodePrice weir.Price `yaml:"node_price"`
	// Tokenizer is the encoding its prompts are counted in on the
	// candidates that name none and on edge nodes (o200k_base,
	// cl100k_base, estimate). Default: see the platform model's.
	Tokenizer weir.Tokenizer `yaml:"tokenizer"`
}

// Candidate is one platform model a public model can be served by.
type Candidate struct {
	// PlatformModel is the name of a platform model. Required.
	PlatformModel string `yaml:"platform_model"`
	// Priority orders candidates: higher is tried first, lower ones are the
	// fallbacks. Default 0.
	Priority int `yaml:"priority"`
	// Weight spreads requests between candidates of equal priority. 0 is
	// taken as the default. Default 1.
	Weight int `yaml:"weight"`
}

// Group is a class of keys with its own limits and default priority. Its
// limits are a platform model's but lease_ttl (see weir.Limits; each
// defaults to 0, no limit); every candidate needs the group's scope, so a
// request past its queue_limit or max_wait gets queue_full or
// queue_timeout.
type Group struct {
	// Name identifies the group; keys are created in a group. Required.
	Name string `yaml:"name"`
	// Priority is the admission priority of its requests: higher first.
	// Default 0.
	Priority int32 `yaml:"priority"`
	// Limits are concurrency, rpm, tpm, queue_limit, max_wait,
	// fairness_window and shadow, written in the entry itself; lease_ttl
	// is not a group's (groupsTakeNo).
	weir.Limits `yaml:",inline"`
	// RoundRobin makes the group's keys take turns for the group's own
	// concurrency instead of being served in arrival order alone. (At a
	// platform model, keys of the same priority always take turns.)
	// Default false.
	RoundRobin bool `yaml:"round_robin"`
	// FailOpen: as a platform model's, for the group's limits. Default
	// unset: fleet.unavailable.
	FailOpen *bool `yaml:"fail_open"`
	// RunModes are the run modes its keys may ask for with
	// X-Weir-Run-Mode: simulation, acceptance. Default none: production
	// only.
	RunModes []weir.RunMode `yaml:"run_modes"`
	// PinPlatform lets its keys pin a request to one platform with
	// X-Weir-Platform. Default false.
	PinPlatform bool `yaml:"pin_platform"`
}

// NoBound is, in a parsed config, the value of a timeout whose 0 in the
// file or the environment means "no bound" (server.upstream_timeout,
// upstream_idle_timeout, upstream_call_timeout, stream_write_timeout,
// default_max_wait): the negative that the packages using them read as
// no bound. Left unset, such a timeout is 0, which those packages read
// as their default: the default lives with the code that applies it.
const NoBound time.Duration = -1

// bounds are the timeouts of NoBound.
func (s *Server) bounds() []*time.Duration {
	return []*time.Duration{&s.DefaultMaxWait, &s.UpstreamTimeout, &s.UpstreamIdleTimeout, &s.UpstreamCallTimeout, &s.StreamWriteTimeout}
}

// unsetBound marks, while a file is parsed, a bound that neither the
// file nor the environment set.
const unsetBound = time.Duration(math.MinInt64)

// markBounds sets the bounds to unsetBound before decoding.
func (s *Server) markBounds() {
	for _, b := range s.bounds() {
		*b = unsetBound
	}
}

// settleBounds, after decoding, leaves an unset bound 0 (the default of
// the package that applies it) and makes an explicit 0 NoBound.
func (s *Server) settleBounds() {
	for _, b := range s.bounds() {
		switch *b {
		case unsetBound:
			*b = 0
		case 0:
			*b = NoBound
		}
	}
}

// Default returns a config with the defaults this package decides and
// an empty catalog. A field it leaves 0 takes the default of the
// package that uses it (see NoBound).
func Default() *Config {
	return &Config{
		Server: Server{
			Listen:            "127.0.0.1:8080",
			MaxBodyBytes:      10 << 20,
			ShutdownTimeout:   30 * time.Second,
			ReadHeaderTimeout: 30 * time.Second,
			BodyTimeout:       60 * time.Second,
			IdleTimeout:       120 * time.Second,
			RetryBudget:       3,
			Cooldown: Cooldown{
				Failures: 3,
				Duration: 30 * time.Second,
			},
			MaxResponseBytes:   64 << 20,
			LogLevel:           "info",
			AccessLog:          true,
			UsageFlushInterval: time.Second,
			KeyCacheTTL:        2 * time.Second,
			MaxEndUserBudgets:  10000,
			AdminLoopback:      "auto",
			HeapFloor:          gcfloor.Default,
		},
		Storage: Storage{
			Driver: "sqlite",
			Path:   "weir.db",
		},
		Fleet: Fleet{
			TermTTL:          10 * time.Second,
			HeartbeatTimeout: 6 * time.Second,
			Poll:             5 * time.Second,
			Unavailable:      UnavailableClosed,
			ReleaseSilent:    ReleaseSilentCallTimeout,
		},
		Edge: Edge{
			HeartbeatInterval: 2 * time.Second,
			HeartbeatTimeout:  6 * time.Second,
			ForgetAfter:       24 * time.Hour,
		},
		Tasks: Tasks{
			Workers:     100,
			QueueLimit:  10_000,
			MaxWait:     24 * time.Hour,
			PollMin:     250 * time.Millisecond,
			PollMax:     10 * time.Second,
			MaxAttempts: 5,
			LeaseTTL:    5 * time.Minute,
			RescueAfter: 2 * time.Minute,
			Retention:   30 * 24 * time.Hour,
		},
		DefaultGroup: "default",
	}
}

// Load reads and parses the config file at path; see Parse.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes a config file strictly over the defaults, expands ${VAR}
// in string values, applies WEIR_* environment overrides and validates the
// result. Empty data gives the defaults (with overrides).
func Parse(data []byte) (*Config, error) {
	return parse(data, os.LookupEnv)
}

// applyEntryDefaults fills the defaults of list entries, which decoding
// over Default() cannot reach.
func (c *Config) applyEntryDefaults() {
	for i := range c.Platforms {
		if c.Platforms[i].Kind == "" {
			c.Platforms[i].Kind = "openai"
		}
	}
	for i := range c.Models {
		for j := range c.Models[i].Candidates {
			if c.Models[i].Candidates[j].Weight == 0 {
				c.Models[i].Candidates[j].Weight = 1
			}
		}
	}
}
