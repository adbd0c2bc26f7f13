package config

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"reflect"
	"strings"
	"time"
	"unicode"

	"github.com/weir-gateway/weir/gcfloor"
)

// NodeConfig is an edge node's config file (`weir node -c node.yaml`):
// the gateway it dials, its token, and the local model runtimes it serves.
// It is loaded as the gateway's file is (see the package doc): strictly
// over DefaultNode(), ${VAR} expanded, then WEIR_NODE_<FIELD> overrides of
// its top-level scalar fields, then validated. examples/node.yaml
// documents every field.
type NodeConfig struct {
	// Gateway is the host:port of the gateway's edge listener. Required.
	// Env WEIR_NODE_GATEWAY.
	Gateway string `yaml:"gateway"`
	// Token is the node's token, "wn-…", as `weir nodes` issued it.
	// Required. Env WEIR_NODE_TOKEN (which is how it is best given).
	Token string `yaml:"token"`
	// TLS, when present, dials the gateway over TLS; absent (the
	// default): plaintext, for loopback and private networks.
	TLS *NodeTLS `yaml:"tls"`
	// StallTimeout is how long a run may wait for any byte of the
	// runtime's answer (its headers, then each read of its body) before
	// the node ends it as stalled and probes the runtime. Default 60s.
	// Env WEIR_NODE_STALL_TIMEOUT.
	StallTimeout time.Duration `yaml:"stall_timeout"`
	// ProbeTimeout bounds one health probe of a runtime (GET
	// <url>/models). Default 5s. Env WEIR_NODE_PROBE_TIMEOUT.
	ProbeTimeout time.Duration `yaml:"probe_timeout"`
	// ShutdownTimeout is how long SIGINT/SIGTERM lets in-flight runs
	// finish before they are cancelled. Default 30s.
	// Env WEIR_NODE_SHUTDOWN_TIMEOUT.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// LogLevel is debug, info, warn or error. Default "info".
	// Env WEIR_NODE_LOG_LEVEL.
	LogLevel string `yaml:"log_level"`
	// HeapFloor is as the gateway's server.heap_floor: the heap, in
	// bytes, below which the garbage collector does not start a cycle.
	// Default 0: none. Env WEIR_NODE_HEAP_FLOOR.
	HeapFloor int64 `yaml:"heap_floor"`
	// Providers are the node's model runtimes. Required: at least one.
	Providers []NodeProvider `yaml:"providers"`
}

// NodeTLS is how a node trusts the gateway's certificate.
type NodeTLS struct {
	// CA is a PEM file of the certificates to trust. Default: empty, the
	// system's roots.
	CA string `yaml:"ca"`
	// ServerName is the name the gateway's certificate must carry.
	// Default: empty, the host of gateway.
	ServerName string `yaml:"server_name"`
}

// NodeProvider is one local OpenAI-compatible runtime (vLLM, llama.cpp,
// Ollama).
type NodeProvider struct {
	// ID names the provider within the node: 1 to 64 of [A-Za-z0-9._-].
	// Required, unique.
	ID string `yaml:"id"`
	// Adapter is the runtime's protocol. Default "openai" (the only one).
	Adapter string `yaml:"adapter"`
	// URL is the runtime's base URL, e.g. http://127.0.0.1:8000/v1; a
	// run's path (/chat/completions) is appended to it. Required.
	URL string `yaml:"url"`
	// Slots is how many requests the runtime serves at once. Required, at
	// least 1.
	Slots int `yaml:"slots"`
	// LongSlots is how many of those may be long-context requests, from 0
	// to slots. Default 0 (no request is long).
	LongSlots int `yaml:"long_slots"`
	// LongPromptTokens is the prompt size past which a request is long:
	// required with long_slots, refused without. Default 0.
	LongPromptTokens int64 `yaml:"long_prompt_tokens"`
	// Models are the models it serves. Required: at least one.
	Models []NodeModel `yaml:"models"`
}

// NodeModel is one model of a provider.
type NodeModel struct {
	// Name is the public model name clients ask for. Required, unique in
	// its provider.
	Name string `yaml:"name"`
	// Runtime is the name the runtime knows the model by. Default: name.
	Runtime string `yaml:"runtime"`
}

// Bounds the gateway holds a registration to (package edge refuses more);
// the node refuses them first, naming the field.
const (
	maxNodeProviders  = 64
	maxNodeModels     = 256
	maxNodeSlots      = 4096
	maxNodeNameBytes  = 128
	maxNodeURLBytes   = 2048
	maxProviderIDSize = 64
)

// DefaultNode returns a node config with every default set and nothing
// to serve.
func DefaultNode() *NodeConfig {
	return &NodeConfig{
		StallTimeout:    60 * time.Second,
		ProbeTimeout:    5 * time.Second,
		ShutdownTimeout: 30 * time.Second,
		LogLevel:        "info",
		HeapFloor:       gcfloor.Default,
	}
}

// LoadNode reads and parses the node config file at path; see ParseNode.
func LoadNode(path string) (*NodeConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load node config: %w", err)
	}
	c, err := ParseNode(data)
	if err != nil {
		return nil, fmt.Errorf("node config %s: %w", path, err)
	}
	return c, nil
}

// ParseNode decodes a node config strictly over DefaultNode(), expands
// ${VAR} in string values, applies WEIR_NODE_* overrides and validates
// the result.
func ParseNode(data []byte) (*NodeConfig, error) {
	return parseNode(data, os.LookupEnv)
}

func parseNode(data []byte, lookup lookupFunc) (*NodeConfig, error) {
	c := DefaultNode()
	if err := decode(data, c); err != nil {
		return nil, err
	}
	if err := expandStrings(c, lookup); err != nil {
		return nil, err
	}
	c.applyEntryDefaults()
	if err := applyEach(nodeOverrides(c), lookup); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// nodeOverrides lists the WEIR_NODE_* variables: one per top-level scalar
// field (WEIR_NODE_TOKEN, WEIR_NODE_STALL_TIMEOUT, ...).
func nodeOverrides(c *NodeConfig) []override {
	return sectionOverrides(reflect.ValueOf(c).Elem(), "WEIR_NODE", "")
}

func (c *NodeConfig) applyEntryDefaults() {
	for i := range c.Providers {
		p := &c.Providers[i]
		if p.Adapter == "" {
			p.Adapter = "openai"
		}
		// The run's path begins with "/": a base URL written with a
		// trailing slash must not double it.
		p.URL = strings.TrimRight(p.URL, "/")
		for j := range p.Models {
			if p.Models[j].Runtime == "" {
				p.Models[j].Runtime = p.Models[j].Name
			}
		}
	}
}

// Validate reports the first problem in c with its path in the file,
// e.g. `providers[1].long_prompt_tokens: required with long_slots`. The
// error matches weir.ErrInvalid.
func (c *NodeConfig) Validate() error {
	if c.Gateway == "" {
		return invalidf("gateway", "required: the gateway's edge listener as host:port")
	}
	if host, port, err := net.SplitHostPort(c.Gateway); err != nil || host == "" || port == "" {
		return invalidf("gateway", "%q is not host:port", c.Gateway)
	}
	switch {
	case c.Token == "":
		return invalidf("token", "required (or set WEIR_NODE_TOKEN)")
	case !strings.HasPrefix(c.Token, "wn-") || strings.ContainsFunc(c.Token, unicode.IsSpace):
		// Never echo the value: it is a credential.
		return invalidf("token", `not a node token: one begins with "wn-" and has no spaces`)
	case c.StallTimeout <= 0:
		return invalidf("stall_timeout", "must be positive")
	case c.ProbeTimeout <= 0:
		return invalidf("probe_timeout", "must be positive")
	case c.ShutdownTimeout < 0:
		return invalidf("shutdown_timeout", "must not be negative")
	case c.HeapFloor < 0:
		return invalidf("heap_floor", "must not be negative (0 for none)")
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return invalidf("log_level", "unknown level %q: want debug, info, warn or error", c.LogLevel)
	}
	switch n := len(c.Providers); {
	case n == 0:
		return invalidf("providers", "required: at least one")
	case n > maxNodeProviders:
		return invalidf("providers", "%d providers; at most %d", n, maxNodeProviders)
	}
	ids := map[string]bool{}
	for i, p := range c.Providers {
		if err := p.validate(fmt.Sprintf("providers[%d]", i), ids); err != nil {
			return err
		}
		ids[p.ID] = true
	}
	return nil
}

func (p *NodeProvider) validate(path string, ids map[string]bool) error {
	switch {
	case p.ID == "":
		return invalidf(path+".id", "required")
	case len(p.ID) > maxProviderIDSize || strings.ContainsFunc(p.ID, notIDRune):
		return invalidf(path+".id", "%q: 1 to %d letters, digits, '.', '_' or '-'", p.ID, maxProviderIDSize)
	case ids[p.ID]:
		return invalidf(path+".id", "provider %q defined twice", p.ID)
	case p.Adapter != "openai":
		return invalidf(path+".adapter", "unknown adapter %q: want openai", p.Adapter)
	case p.URL == "":
		return invalidf(path+".url", "required: the runtime's base URL, e.g. http://127.0.0.1:8000/v1")
	case len(p.URL) > maxNodeURLBytes:
		return invalidf(path+".url", "longer than %d bytes", maxNodeURLBytes)
	}
	if u, err := url.Parse(p.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.RawQuery != "" || u.Fragment != "" {
		return invalidf(path+".url", "%q is not an http(s) base URL", p.URL)
	}
	switch {
	case p.Slots < 1 || p.Slots > maxNodeSlots:
		return invalidf(path+".slots", "%d: from 1 to %d", p.Slots, maxNodeSlots)
	case p.LongSlots < 0 || p.LongSlots > p.Slots:
		return invalidf(path+".long_slots", "%d: from 0 to slots (%d)", p.LongSlots, p.Slots)
	case p.LongSlots > 0 && p.LongPromptTokens <= 0:
		return invalidf(path+".long_prompt_tokens", "required with long_slots: the prompt size that needs a long slot")
	case p.LongSlots == 0 && p.LongPromptTokens != 0:
		return invalidf(path+".long_prompt_tokens", "set without long_slots")
	case len(p.Models) == 0:
		return invalidf(path+".models", "required: at least one")
	case len(p.Models) > maxNodeModels:
		return invalidf(path+".models", "%d models; at most %d", len(p.Models), maxNodeModels)
	}
	names := map[string]bool{}
	for j, m := range p.Models {
		mp := fmt.Sprintf("%s.models[%d]", path, j)
		if err := validModelName(m.Name); err != nil {
			return invalidf(mp+".name", "%s", err)
		}
		if names[m.Name] {
			return invalidf(mp+".name", "model %q listed twice", m.Name)
		}
		names[m.Name] = true
		if err := validModelName(m.Runtime); err != nil {
			return invalidf(mp+".runtime", "%s", err)
		}
	}
	return nil
}

func notIDRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
}

// validModelName: 1 to 128 bytes, printable, no spaces, as the gateway
// takes them.
func validModelName(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("required")
	case len(s) > maxNodeNameBytes:
		return fmt.Errorf("longer than %d bytes", maxNodeNameBytes)
	case strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }):
		return fmt.Errorf("%q has a space or an unprintable character", s)
	}
	return nil
}
