package weir

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Platform is one upstream account.
type Platform struct {
	Name string
	// Kind is the upstream's protocol, one of PlatformKinds.
	Kind    string
	BaseURL string
	// APIKey is the credential, read from the environment variable the
	// config names; never stored.
	APIKey string
	// Timeout bounds the wait for an upstream call's response headers
	// (0: the gateway default).
	Timeout time.Duration
	// IdleTimeout bounds each wait for more of an answer once its headers
	// are in: the gap between a stream's chunks (0: the gateway default).
	IdleTimeout time.Duration
	// CallTimeout bounds one upstream call whole, from sending it to the
	// end of its answer (0: the gateway default).
	CallTimeout time.Duration
	// TranslateResponses sends an openai or azure platform Responses
	// requests translated to Chat Completions, as every other kind is,
	// instead of passing them through: for an OpenAI-compatible server
	// that lacks the Responses API. Default false.
	TranslateResponses bool
	// APIVersion is the API version an azure platform's calls name
	// (api-version); "": the adapter's default.
	APIVersion string
	// Region is a bedrock platform's AWS region; required there.
	Region string
	// AccessKeyID, SecretAccessKey and SessionToken are a bedrock
	// platform's AWS key pair, read from the environment variables the
	// config names; never stored. None: the AWS SDK's default credential
	// chain, or APIKey as a Bedrock API key.
	AccessKeyID, SecretAccessKey, SessionToken string
	// TenantID, ClientID and ClientSecret are an azure platform's service
	// principal, which signs in with Microsoft Entra ID and sends its
	// access token instead of APIKey; the secret is read from the
	// environment variable the config names, never stored. TokenURL
	// overrides the tenant's token endpoint on Microsoft's public cloud
	// ("": that one).
	TenantID, ClientID, ClientSecret, TokenURL string
}

// Limits are the capacity settings of a scope, shared by platform models,
// groups and keys: the one struct from the config file (the yaml tags are
// the file's keys, inlined in each entry) to the engine's ScopeConfig.
// Every limit's default is 0, which means no limit.
type Limits struct {
	// Concurrency is how many requests may run at once.
	Concurrency int64 `yaml:"concurrency"`
	// RPM is the requests-per-minute limit.
	RPM int64 `yaml:"rpm"`
	// TPM is the tokens-per-minute limit.
	TPM int64 `yaml:"tpm"`
	// QueueLimit is how many requests may wait; past it a request gets
	// queue_full (or, at a platform model, falls back to another
	// candidate).
	QueueLimit int `yaml:"queue_limit"`
	// MaxWait is how long a request may wait, counted from its arrival;
	// past it the request gets queue_timeout (or, at a platform model,
	// waits on its other candidates).
	MaxWait time.Duration `yaml:"max_wait"`
	// LeaseTTL is how long a granted slot lives without renewal before it
	// is reclaimed. Only a platform model's applies: a group's or a key's
	// scope holds its slots until the request ends.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// FairnessWindow is how long a waiter may be passed over by later ones
	// before capacity is held for it.
	FairnessWindow time.Duration `yaml:"fairness_window"`
	// Shadow rolls the limits out safely: they are judged on every request
	// as ever, but enforced nowhere — no request waits, is refused or
	// falls back for them — and what they would have made wait, refused
	// or dropped is counted (weir_shadow_total, /admin/queues) and logged.
	// Default false: enforced.
	Shadow bool `yaml:"shadow"`
}

// PlatformModel is one model on one platform.
type PlatformModel struct {
	// Name identifies it in the catalog, e.g. "openai-main/gpt-4o".
	Name     string
	Platform string
	// Upstream is the model name sent to the platform.
	Upstream string
	Limits
	// FailOpen: while a fleet's replicas reach no leader, each admits
	// its share of these limits instead of nothing. Default false.
	FailOpen bool
	// Supports is what it can serve: a request that needs more is not
	// sent to it.
	Supports Capabilities
	// Simulate is how the simulator answers for it in the simulation run
	// mode; the zero value answers at once, always well.
	Simulate Simulation
	// Price is what its calls cost; the zero value: nothing.
	Price Price
	// Tokenizer is the encoding its prompts are counted in (TokenizerOf).
	// Default "": its model's, else by its upstream name.
	Tokenizer Tokenizer
}

// RunMode is how a request runs. The default, "", is production.
type RunMode string

// RunSimulation: admission, routing, queueing and usage as ever, while
// the upstream call is answered by the simulator (Simulation): nothing
// reaches a provider, and nothing is paid for.
const RunSimulation RunMode = "simulation"

// RunAcceptance: the real pipeline and the real upstreams, for a run
// named by its id. A run's requests count against their key's and
// group's scopes as production's do: a tenant's limits are the tenant's
// whatever the run. In place of a platform model's scope they need its
// acceptance copy (AcceptanceScope), one per platform model shared by
// every run: production's limits with a queue of AcceptanceQueueLimit
// and a wait of up to AcceptanceMaxWait. So trying a new platform
// neither starves production there nor is starved by it, and the runs
// together add at most one copy of a platform model's limits on top of
// production's, whatever the number of runs; an operator who must keep
// the sum under a provider's cap lowers the platform model's limits (or
// the copy's). A run's tasks also need the acceptance share of the task
// workers, so production's tasks always find workers. Usage is named by
// run.
const RunAcceptance RunMode = "acceptance"

// The queue bound and longest wait of a platform model's acceptance
// copy.
const (
	AcceptanceQueueLimit = 10_000
	AcceptanceMaxWait    = 15 * time.Minute
)

// Valid reports whether m is a known run mode ("" is production).
func (m RunMode) Valid() bool { return m == "" || m == RunSimulation || m == RunAcceptance }

// MaxRunID bounds an acceptance run id's length.
const MaxRunID = 64

// ValidRunID reports whether id may name an acceptance run: 1 to
// MaxRunID letters, digits, '.', '_' or '-'.
func ValidRunID(id string) bool {
	if id == "" || len(id) > MaxRunID {
		return false
	}
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
		default:
			return false
		}
	}
	return true
}

// Simulation is how the simulator answers a platform model's calls in
// the simulation run mode: the mock provider's own behaviour, configured.
type Simulation struct {
	// Latency is the time to an answer (to its first chunk, for a
	// stream), LatencyJitter up to as much again at random.
	Latency       time.Duration `yaml:"latency"`
	LatencyJitter time.Duration `yaml:"latency_jitter"`
	// ErrorRate is the share of calls answered 500 (0 to 1).
	ErrorRate float64 `yaml:"error_rate"`
	// MaxConcurrent, when set, answers the calls past it 429 with
	// RetryAfter, as a provider's concurrency cap does.
	MaxConcurrent int           `yaml:"max_concurrent"`
	RetryAfter    time.Duration `yaml:"retry_after"`
	// JobDuration is how long a simulated task's job runs (a video's
	// render, say), JobFailureRate the share of jobs that end failed (0
	// to 1), and MaxJobs, when set, the jobs it runs at once: a submit
	// past it is answered 429 with RetryAfter, as a provider's job cap.
	JobDuration    time.Duration `yaml:"job_duration"`
	JobFailureRate float64       `yaml:"job_failure_rate"`
	MaxJobs        int           `yaml:"max_jobs"`
}

func (sim Simulation) validate() *FieldError {
	switch {
	case sim.Latency < 0, sim.LatencyJitter < 0, sim.RetryAfter < 0, sim.JobDuration < 0:
		return invalidf("latency", "durations must not be negative")
	case sim.JobFailureRate < 0 || sim.JobFailureRate > 1:
		return invalidf("job_failure_rate", "%g is not a share from 0 to 1", sim.JobFailureRate)
	case sim.MaxJobs < 0:
		return invalidf("max_jobs", "must not be negative")
	case sim.ErrorRate < 0 || sim.ErrorRate > 1:
		return invalidf("error_rate", "%g is not a share from 0 to 1", sim.ErrorRate)
	case sim.MaxConcurrent < 0:
		return invalidf("max_concurrent", "must not be negative")
	}
	return nil
}

// Capabilities are what a platform model can serve. A request that needs
// what a candidate lacks is not queued for it; one that no candidate can
// serve is refused at once, naming the parameter. The zero value claims
// nothing and so refuses nothing: an unset field is not checked.
type Capabilities struct {
	// ContextWindow bounds a request's prompt (counted in its tokenizer's
	// encoding, TokenizerOf) and its max_tokens together, in tokens.
	ContextWindow int64 `yaml:"context_window"`
	// MaxOutputTokens bounds a request's max_tokens (or
	// max_completion_tokens).
	MaxOutputTokens int64 `yaml:"max_output_tokens"`
	// Tools, Vision, JSONOutput and Streaming, set false, refuse a request
	// with tools (or functions), with image input, with a JSON
	// response_format, or asking for a stream.
	Tools      *bool `yaml:"tools"`
	Vision     *bool `yaml:"vision"`
	JSONOutput *bool `yaml:"json_output"`
	Streaming  *bool `yaml:"streaming"`
	// Sizes are the image or video sizes it takes ("1024x1024"), Voices
	// its speech voices, Seconds its video durations; empty: any.
	Sizes   []string `yaml:"sizes"`
	Voices  []string `yaml:"voices"`
	Seconds []int    `yaml:"seconds"`
	// ResponseFormats are the response_format values it answers in
	// ("b64_json", "url"; "json", "text", "srt", "verbose_json", "vtt");
	// empty: any.
	ResponseFormats []string `yaml:"response_formats"`
	// MaxFileBytes bounds an upload's files (an image to edit, audio to
	// transcribe), in bytes, each; 0: only the server's bound
	// (server.max_upload_bytes).
	MaxFileBytes int64 `yaml:"max_file_bytes"`
}

// Wants is what one request needs of a platform model besides its model.
type Wants struct {
	// PromptTokens is the prompt's count (in the candidate's tokenizer's
	// encoding, where the caller knows it; else the estimate); MaxTokens
	// the output asked for (0: not said).
	PromptTokens, MaxTokens           int64
	Tools, Vision, JSONOutput, Stream bool
	// Size, Voice and Seconds, when set, are the request's.
	Size, Voice string
	Seconds     int
	// N is the number of images asked for (0: not said, one); Quality
	// theirs. Characters is the length of the input to speech, in
	// characters. Prices read them (Price.Estimate).
	N          int64
	Quality    string
	Characters int64
	// ResponseFormat is the request's response_format, if it set one;
	// FileBytes the size of its largest uploaded file (0: none).
	ResponseFormat string
	FileBytes      int64
}

// TaskWants is what a task's input needs of a candidate and what prices
// it: a video's size and seconds (which OpenAI's API sends as a string),
// an image's size, quality and n, speech's voice and its input's
// characters, a chat's max_tokens, a transcription's file size, and the
// prompt's estimate (four bytes of JSON a token, the file's aside).
func TaskWants(input []byte) Wants {
	var in struct {
		Size           any    `json:"size"`
		Seconds        any    `json:"seconds"`
		N              any    `json:"n"`
		Quality        any    `json:"quality"`
		Voice          any    `json:"voice"`
		Input          any    `json:"input"`
		ResponseFormat any    `json:"response_format"`
		MaxTokens      *int64 `json:"max_tokens"`
		MaxCompletion  *int64 `json:"max_completion_tokens"`
		File           struct {
			Data string `json:"data"`
		} `json:"file"`
	}
	var w Wants
	if json.Unmarshal(input, &in) != nil {
		return w
	}
	w.Size, _ = in.Size.(string)
	w.Quality, _ = in.Quality.(string)
	w.Voice, _ = in.Voice.(string)
	w.ResponseFormat, _ = in.ResponseFormat.(string)
	// A file (a transcription's audio, base64) is no part of a prompt.
	w.PromptTokens = int64(len(input)-len(in.File.Data))/4 + 1
	if d := in.File.Data; d != "" {
		w.FileBytes = int64(base64.StdEncoding.DecodedLen(len(d)) - strings.Count(d[max(len(d)-2, 0):], "="))
	}
	if s, ok := in.Input.(string); ok {
		w.Characters = int64(utf8.RuneCountInString(s))
	}
	if n, ok := in.N.(float64); ok && n >= 1 && n == float64(int64(n)) {
		w.N = int64(n)
	}
	for _, m := range []*int64{in.MaxCompletion, in.MaxTokens} {
		if m != nil && *m > 0 {
			w.MaxTokens = *m
		}
	}
	switch v := in.Seconds.(type) {
	case string:
		w.Seconds, _ = strconv.Atoi(v)
	case float64:
		if v == float64(int(v)) {
			w.Seconds = int(v)
		}
	}
	return w
}

// Refuses reports the first thing w needs that c lacks: the request
// parameter it comes from, and why, in words for the client about "it",
// the candidate.
func (c Capabilities) Refuses(w Wants) (param, why string, refused bool) {
	lacks := func(b *bool) bool { return b != nil && !*b }
	switch {
	case c.MaxOutputTokens > 0 && w.MaxTokens > c.MaxOutputTokens:
		return "max_tokens", fmt.Sprintf("max_tokens %d is over what it writes (%d)", w.MaxTokens, c.MaxOutputTokens), true
	case c.ContextWindow > 0 && w.PromptTokens+w.MaxTokens > c.ContextWindow:
		return "messages", fmt.Sprintf("the prompt (about %d tokens) and max_tokens (%d) do not fit its context window (%d)", w.PromptTokens, w.MaxTokens, c.ContextWindow), true
	case w.Tools && lacks(c.Tools):
		return "tools", "it takes no tools", true
	case w.Vision && lacks(c.Vision):
		return "messages", "it takes no image input", true
	case w.JSONOutput && lacks(c.JSONOutput):
		return "response_format", "it gives no JSON output", true
	case w.Stream && lacks(c.Streaming):
		return "stream", "it does not stream", true
	case w.Size != "" && len(c.Sizes) > 0 && !slices.Contains(c.Sizes, w.Size):
		return "size", fmt.Sprintf("it takes no size %q", w.Size), true
	case w.Voice != "" && len(c.Voices) > 0 && !slices.Contains(c.Voices, w.Voice):
		return "voice", fmt.Sprintf("it has no voice %q", w.Voice), true
	case w.Seconds != 0 && len(c.Seconds) > 0 && !slices.Contains(c.Seconds, w.Seconds):
		return "seconds", fmt.Sprintf("it makes no %d-second video", w.Seconds), true
	case w.ResponseFormat != "" && len(c.ResponseFormats) > 0 && !slices.Contains(c.ResponseFormats, w.ResponseFormat):
		return "response_format", fmt.Sprintf("it does not answer in %q", w.ResponseFormat), true
	case c.MaxFileBytes > 0 && w.FileBytes > c.MaxFileBytes:
		return "file", fmt.Sprintf("the file (%d bytes) is larger than it takes (%d)", w.FileBytes, c.MaxFileBytes), true
	}
	return "", "", false
}

func (c Capabilities) validate() *FieldError {
	switch {
	case c.ContextWindow < 0:
		return invalidf("context_window", "must not be negative (0: not checked)")
	case c.MaxOutputTokens < 0:
		return invalidf("max_output_tokens", "must not be negative (0: not checked)")
	case c.MaxFileBytes < 0:
		return invalidf("max_file_bytes", "must not be negative (0: not checked)")
	}
	for i, s := range c.Seconds {
		if s <= 0 {
			return invalidf(fmt.Sprintf("seconds[%d]", i), "must be positive")
		}
	}
	return nil
}

// Candidate is one platform model a public model can be served by.
type Candidate struct {
	PlatformModel string
	// Priority orders candidates: higher is tried first. Equal priorities
	// are spread by Weight.
	Priority int
	Weight   int
}

// Model is the public name a client asks for.
type Model struct {
	Name       string
	Kind       ModelKind
	Candidates []Candidate
	// Nodes places the edge nodes' providers serving the model among its
	// candidates. Default "" is NodesFirst.
	Nodes NodesOrder
	// Affinity sends requests that share a prompt prefix (or a
	// prompt_cache_key, or a user) to the candidate that served the last
	// of them, so that its prompt cache is hit. Default "": off.
	Affinity Affinity
	// AffinityWait bounds how long a strict affinity waits for its
	// candidate before the others may serve. Default 0: 2 s.
	AffinityWait time.Duration
	// NodePrice is what a call of the model served by an edge node's
	// provider costs: nodes register their providers themselves, so the
	// gateway's price for them is the model's. The zero value: nothing.
	NodePrice Price
	// Tokenizer is the encoding its prompts are counted in on the
	// candidates that name none, and on edge nodes. Default "": by each
	// candidate's upstream name (TokenizerOf).
	Tokenizer Tokenizer
}

// Affinity is how strongly a model's requests keep to the candidate that
// served their prompt prefix last.
type Affinity string

const (
	// AffinityOff: candidates in their own order.
	AffinityOff Affinity = "off"
	// AffinityPrefer: the last candidate first, when it has room; else
	// the others, as ever. It only orders candidates: it never jumps a
	// queue.
	AffinityPrefer Affinity = "prefer"
	// AffinityStrict: only the last candidate, for up to the model's
	// AffinityWait; then any.
	AffinityStrict Affinity = "strict"
)

// Valid reports whether a is a known affinity ("" is off).
func (a Affinity) Valid() bool {
	return a == "" || a == AffinityOff || a == AffinityPrefer || a == AffinityStrict
}

// On reports whether a orders candidates at all.
func (a Affinity) On() bool { return a == AffinityPrefer || a == AffinityStrict }

// NodesOrder is where a model's edge node providers stand among its
// candidates.
type NodesOrder string

const (
	// NodesFirst: the nodes' providers before the platform models (local
	// GPUs first, a cloud platform as the fallback). The default.
	NodesFirst NodesOrder = "first"
	// NodesLast: the platform models first, the nodes as the fallback.
	NodesLast NodesOrder = "last"
	// NodesNever: no node serves the model.
	NodesNever NodesOrder = "never"
)

// Valid reports whether o is a known order ("" is the default).
func (o NodesOrder) Valid() bool {
	return o == "" || o == NodesFirst || o == NodesLast || o == NodesNever
}

// NodeTarget is one edge node's provider serving a model, in the session
// (generation) that registered it.
//
// Its JSON is how the fleet's replicas pass it to each other (the board
// of nodes, relayed runs).
type NodeTarget struct {
	Node     string `json:"node"`
	Gen      uint64 `json:"gen"`
	Provider string `json:"provider"`
	// Runtime is the runtime's own name for the model.
	Runtime string `json:"runtime"`
	// LongPromptTokens: a request whose prompt has more tokens needs a
	// long-context slot too (NodeLongScope); 0: the provider has none.
	LongPromptTokens int64 `json:"long_prompt_tokens,omitempty"`
	// Long: the call holds one of the provider's long-context slots (the
	// node counts them).
	Long bool `json:"long,omitempty"`
}

// Name names the target in metrics, logs and usage: its slots' scope.
func (t NodeTarget) Name() string { return NodeScope(t.Node, t.Provider) }

// CompareNodeTargets orders targets by node, then provider: the order in
// which a model's node providers are offered.
func CompareNodeTargets(a, b NodeTarget) int {
	return cmp.Or(strings.Compare(a.Node, b.Node), strings.Compare(a.Provider, b.Provider))
}

// Group is a class of users with its own limits and default priority.
type Group struct {
	Name     string
	Priority int32
	Limits
	// RoundRobin makes the group's scope share turns between its keys.
	RoundRobin bool
	// FailOpen: as a platform model's. Default false.
	FailOpen bool
	// RunModes are the run modes its keys may ask for besides
	// production.
	RunModes []RunMode
	// PinPlatform lets its keys pin a request to one platform
	// (X-Weir-Platform): only that platform's candidates serve it.
	PinPlatform bool
}

// Allows reports whether g's keys may run requests in mode m.
func (g Group) Allows(m RunMode) bool { return m == "" || slices.Contains(g.RunModes, m) }

// Catalog is everything the gateway serves, as loaded from config.
type Catalog struct {
	Platforms      []Platform
	PlatformModels []PlatformModel
	Models         []Model
	Groups         []Group
	// Budgets are the config file's, each with its ConfigBudgetID; the
	// store keeps those set at run time.
	Budgets []Budget
}

// Validate holds the catalog's rules, references and values: every entry
// named, no name defined twice, every reference to a defined entry, known
// kinds, http(s) base URLs, no negative limit, timeout or weight. It
// reports the first problem as a *FieldError whose path names the field
// as the config file does ("platform_models[1].platform", indexes into
// c's lists).
func (c *Catalog) Validate() error {
	platforms := map[string]bool{}
	for i, p := range c.Platforms {
		if err := p.validate(platforms); err != nil {
			return err.within(fmt.Sprintf("platforms[%d]", i))
		}
		platforms[p.Name] = true
	}
	pms := map[string]bool{}
	for i, pm := range c.PlatformModels {
		if err := pm.validate(platforms, pms); err != nil {
			return err.within(fmt.Sprintf("platform_models[%d]", i))
		}
		pms[pm.Name] = true
	}
	models := map[string]bool{}
	for i, m := range c.Models {
		if err := m.validate(pms, models); err != nil {
			return err.within(fmt.Sprintf("models[%d]", i))
		}
		if err := c.servable(m); err != nil {
			return err.within(fmt.Sprintf("models[%d]", i))
		}
		models[m.Name] = true
	}
	groups := map[string]bool{}
	for i, g := range c.Groups {
		if err := g.validate(groups); err != nil {
			return err.within(fmt.Sprintf("groups[%d]", i))
		}
		groups[g.Name] = true
	}
	if err := c.validateBudgets(); err != nil {
		return err
	}
	return nil
}

// validate checks p, given the platforms defined before it.
func (p Platform) validate(defined map[string]bool) *FieldError {
	switch {
	case p.Name == "":
		return invalidf("name", "required")
	case defined[p.Name]:
		return invalidf("name", "platform %q defined twice", p.Name)
	case !slices.Contains(PlatformKinds, p.Kind):
		return invalidf("kind", "unknown kind %q: want one of %s", p.Kind, strings.Join(PlatformKinds, ", "))
	case p.Kind == "bedrock" && p.Region == "":
		return invalidf("region", "required for a bedrock platform")
	case (p.AccessKeyID == "") != (p.SecretAccessKey == ""):
		return invalidf("secret_access_key", "an AWS access key id and its secret go together")
	case p.Kind != "azure" && (p.TenantID != "" || p.ClientID != "" || p.ClientSecret != "" || p.TokenURL != ""):
		return invalidf("tenant_id", "Microsoft Entra ID client credentials are an azure platform's")
	case (p.TenantID == "") != (p.ClientID == ""):
		return invalidf("client_id", "a tenant id and a client id go together")
	case p.TenantID == "" && (p.ClientSecret != "" || p.TokenURL != ""):
		return invalidf("tenant_id", "a client secret and a token url go with a tenant id and a client id")
	case p.TenantID != "" && p.APIKey != "":
		return invalidf("api_key", "an azure platform signs in with Entra ID or sends an API key, not both")
	case p.BaseURL == "" && p.Kind != "bedrock": // bedrock's endpoint is its region's by default
		return invalidf("base_url", "required")
	case p.Timeout < 0:
		return invalidf("timeout", "must not be negative")
	case p.IdleTimeout < 0:
		return invalidf("idle_timeout", "must not be negative")
	case p.CallTimeout < 0:
		return invalidf("call_timeout", "must not be negative")
	}
	if p.TokenURL != "" {
		if u, err := url.Parse(p.TokenURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return invalidf("token_url", "%q is not an http or https URL", p.TokenURL)
		}
	}
	if p.BaseURL == "" {
		return nil
	}
	u, err := url.Parse(p.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return invalidf("base_url", "%q is not an http or https URL", p.BaseURL)
	}
	return nil
}

// validate checks pm, given the platforms and the platform models defined
// before it.
func (pm PlatformModel) validate(platforms, defined map[string]bool) *FieldError {
	switch {
	case pm.Name == "":
		return invalidf("name", "required")
	case defined[pm.Name]:
		return invalidf("name", "platform model %q defined twice", pm.Name)
	case pm.Platform == "":
		return invalidf("platform", "required")
	case !platforms[pm.Platform]:
		return invalidf("platform", "unknown platform %q", pm.Platform)
	case pm.Upstream == "":
		return invalidf("upstream", "required: the model name sent to the platform")
	}
	if err := pm.Supports.validate(); err != nil {
		return err.within("capabilities")
	}
	if err := pm.Simulate.validate(); err != nil {
		return err.within("simulate")
	}
	if err := pm.Price.validate(); err != nil {
		return err.within("price")
	}
	if !pm.Tokenizer.Valid() {
		return unknownTokenizer(pm.Tokenizer)
	}
	return pm.Limits.validate()
}

// validate checks m, given the platform models and the models defined
// before it.
func (m Model) validate(pms, defined map[string]bool) *FieldError {
	switch {
	case m.Name == "":
		return invalidf("name", "required")
	case defined[m.Name]:
		return invalidf("name", "model %q defined twice", m.Name)
	case !m.Kind.Valid():
		return invalidf("kind", "unknown kind %q: want %s, %s, %s, %s, %s or %s",
			m.Kind, KindChat, KindEmbeddings, KindImages, KindSpeech, KindTranscription, KindVideo)
	case !m.Nodes.Valid():
		return invalidf("nodes", "unknown order %q: want %s, %s or %s", m.Nodes, NodesFirst, NodesLast, NodesNever)
	case !m.Affinity.Valid():
		return invalidf("affinity", "unknown affinity %q: want %s, %s or %s", m.Affinity, AffinityOff, AffinityPrefer, AffinityStrict)
	case m.AffinityWait < 0:
		return invalidf("affinity_wait", "must not be negative")
	case m.NodePrice.validate() != nil:
		return m.NodePrice.validate().within("node_price")
	case !m.Tokenizer.Valid():
		return unknownTokenizer(m.Tokenizer)
	case len(m.Candidates) == 0 && (m.Nodes == NodesNever || m.Kind.Async()):
		why := "nodes: never"
		if m.Kind.Async() {
			why = "edge nodes run no tasks"
		}
		return invalidf("candidates", "at least one candidate is required (%s)", why)
	}
	seen := map[string]bool{}
	for j, cd := range m.Candidates {
		var err *FieldError
		switch {
		case cd.PlatformModel == "":
			err = invalidf("platform_model", "required")
		case !pms[cd.PlatformModel]:
			err = invalidf("platform_model", "unknown platform model %q", cd.PlatformModel)
		case seen[cd.PlatformModel]:
			err = invalidf("platform_model", "%q listed twice", cd.PlatformModel)
		case cd.Weight < 0:
			err = invalidf("weight", "must not be negative")
		}
		if err != nil {
			return err.within(fmt.Sprintf("candidates[%d]", j))
		}
		seen[cd.PlatformModel] = true
	}
	return nil
}

// servable checks that every candidate of m is on a platform whose kind
// serves m's kind (a gemini platform serves no embeddings), given that
// the candidates name defined platform models.
func (c *Catalog) servable(m Model) *FieldError {
	kinds := make(map[string]string, len(c.Platforms))
	for _, p := range c.Platforms {
		kinds[p.Name] = p.Kind
	}
	for j, cd := range m.Candidates {
		pm, _ := c.PlatformModel(cd.PlatformModel)
		if pk := kinds[pm.Platform]; !PlatformKindServes(pk, m.Kind) {
			return invalidf("platform_model", "%q is on platform %q of kind %s, which serves no %s models",
				cd.PlatformModel, pm.Platform, pk, m.Kind).within(fmt.Sprintf("candidates[%d]", j))
		}
	}
	return nil
}

// validate checks g, given the groups defined before it.
func (g Group) validate(defined map[string]bool) *FieldError {
	switch {
	case g.Name == "":
		return invalidf("name", "required")
	case defined[g.Name]:
		return invalidf("name", "group %q defined twice", g.Name)
	}
	for i, m := range g.RunModes {
		if m == "" || !m.Valid() {
			return invalidf(fmt.Sprintf("run_modes[%d]", i), "unknown run mode %q: want %s or %s", m, RunSimulation, RunAcceptance)
		}
	}
	return g.Limits.validate()
}

// Validate rejects negative limits: a *FieldError naming the first.
func (l Limits) Validate() error {
	if err := l.validate(); err != nil {
		return err
	}
	return nil
}

func (l Limits) validate() *FieldError {
	for _, f := range []struct {
		name     string
		negative bool
	}{
		{"concurrency", l.Concurrency < 0},
		{"rpm", l.RPM < 0},
		{"tpm", l.TPM < 0},
		{"queue_limit", l.QueueLimit < 0},
		{"max_wait", l.MaxWait < 0},
		{"lease_ttl", l.LeaseTTL < 0},
		{"fairness_window", l.FairnessWindow < 0},
	} {
		if f.negative {
			return invalidf(f.name, "must not be negative (0 means no limit)")
		}
	}
	return nil
}

// CheckKeyGroup checks the group a new key is to count against: a key of
// a group the catalog has not would count against the default group's
// limits without anyone being told. The error is a *FieldError on
// "group" that names the groups there are. Every way a key is made
// (weir keys create, the console) asks this.
func (c *Catalog) CheckKeyGroup(name string) error {
	names := make([]string, 0, len(c.Groups))
	for _, g := range c.Groups {
		if g.Name == name {
			return nil
		}
		names = append(names, g.Name)
	}
	slices.Sort(names)
	return invalidf("group", "no group %q in the catalog (groups: %s); a key must name one of them, or none for the default group",
		name, strings.Join(names, ", "))
}

// PlatformModel finds a platform model by name.
func (c *Catalog) PlatformModel(name string) (PlatformModel, bool) {
	for _, pm := range c.PlatformModels {
		if pm.Name == name {
			return pm, true
		}
	}
	return PlatformModel{}, false
}
