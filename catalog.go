package weir

import (
	"fmt"
	"strings"
	"time"
)

// ModelKind is what a public model serves, which decides the endpoints it
// answers on.
type ModelKind string

const (
	KindChat       ModelKind = "chat"
	KindEmbeddings ModelKind = "embeddings"
	KindImages     ModelKind = "images"
	KindSpeech     ModelKind = "audio_speech"
	// KindVideo models run as durable asynchronous tasks (the video API
	// and the generic task API).
	KindVideo ModelKind = "video"
)

// Async reports whether k's requests run as durable tasks.
func (k ModelKind) Async() bool { return k == KindVideo }

// Valid reports whether k is a known kind.
func (k ModelKind) Valid() bool {
	switch k {
	case KindChat, KindEmbeddings, KindImages, KindSpeech, KindVideo:
		return true
	}
	return false
}

// Platform is one upstream account.
type Platform struct {
	Name string
	// Kind is the adapter: "openai" (any OpenAI-compatible API).
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
}

// The admission scopes the catalog makes, by name: every request needs
// its key's, its group's and its platform model's.
func KeyScope(keyID string) string        { return "key:" + keyID }
func GroupScope(group string) string      { return "group:" + group }
func PlatformModelScope(pm string) string { return pmScopePrefix + pm }

const pmScopePrefix = "pm:"

// PlatformModelOfScope returns the platform model a scope is for, and
// whether it is a platform model's scope.
func PlatformModelOfScope(scope string) (string, bool) {
	return strings.CutPrefix(scope, pmScopePrefix)
}

// ScopeLabel names a scope as the catalog's users know it, for messages:
// "platform model up/m", "key key_1", "group default"; any other scope as
// "scope <name>".
func ScopeLabel(scope string) string {
	if pm, ok := PlatformModelOfScope(scope); ok {
		return "platform model " + pm
	}
	if k, ok := strings.CutPrefix(scope, "key:"); ok {
		return "key " + k
	}
	if g, ok := strings.CutPrefix(scope, "group:"); ok {
		return "group " + g
	}
	return "scope " + scope
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
}

// PlatformModel is one model on one platform.
type PlatformModel struct {
	// Name identifies it in the catalog, e.g. "openai-main/gpt-4o".
	Name     string
	Platform string
	// Upstream is the model name sent to the platform.
	Upstream string
	Limits
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
}

// Group is a class of users with its own limits and default priority.
type Group struct {
	Name     string
	Priority int32
	Limits
	// RoundRobin makes the group's scope share turns between its keys.
	RoundRobin bool
}

// Catalog is everything the gateway serves, as loaded from config.
type Catalog struct {
	Platforms      []Platform
	PlatformModels []PlatformModel
	Models         []Model
	Groups         []Group
}

// Validate checks references and values; it reports the first problem.
func (c *Catalog) Validate() error {
	platforms := map[string]bool{}
	for _, p := range c.Platforms {
		switch {
		case p.Name == "":
			return fmt.Errorf("%w: platform without a name", ErrInvalid)
		case platforms[p.Name]:
			return fmt.Errorf("%w: platform %s defined twice", ErrInvalid, p.Name)
		case p.Kind != "openai":
			return fmt.Errorf("%w: platform %s: unknown kind %q", ErrInvalid, p.Name, p.Kind)
		case p.BaseURL == "":
			return fmt.Errorf("%w: platform %s has no base_url", ErrInvalid, p.Name)
		}
		platforms[p.Name] = true
	}
	pms := map[string]bool{}
	for _, pm := range c.PlatformModels {
		switch {
		case pm.Name == "":
			return fmt.Errorf("%w: platform model without a name", ErrInvalid)
		case pms[pm.Name]:
			return fmt.Errorf("%w: platform model %s defined twice", ErrInvalid, pm.Name)
		case !platforms[pm.Platform]:
			return fmt.Errorf("%w: platform model %s: unknown platform %q", ErrInvalid, pm.Name, pm.Platform)
		case pm.Upstream == "":
			return fmt.Errorf("%w: platform model %s has no upstream model", ErrInvalid, pm.Name)
		}
		if err := pm.Limits.Validate(); err != nil {
			return fmt.Errorf("platform model %s: %w", pm.Name, err)
		}
		pms[pm.Name] = true
	}
	models := map[string]bool{}
	for _, m := range c.Models {
		switch {
		case m.Name == "":
			return fmt.Errorf("%w: model without a name", ErrInvalid)
		case models[m.Name]:
			return fmt.Errorf("%w: model %s defined twice", ErrInvalid, m.Name)
		case !m.Kind.Valid():
			return fmt.Errorf("%w: model %s: unknown kind %q", ErrInvalid, m.Name, m.Kind)
		case len(m.Candidates) == 0:
			return fmt.Errorf("%w: model %s has no candidates", ErrInvalid, m.Name)
		}
		for _, cd := range m.Candidates {
			if !pms[cd.PlatformModel] {
				return fmt.Errorf("%w: model %s: unknown platform model %q", ErrInvalid, m.Name, cd.PlatformModel)
			}
			if cd.Weight < 0 {
				return fmt.Errorf("%w: model %s: negative weight", ErrInvalid, m.Name)
			}
		}
		models[m.Name] = true
	}
	groups := map[string]bool{}
	for _, g := range c.Groups {
		switch {
		case g.Name == "":
			return fmt.Errorf("%w: group without a name", ErrInvalid)
		case groups[g.Name]:
			return fmt.Errorf("%w: group %s defined twice", ErrInvalid, g.Name)
		}
		if err := g.Limits.Validate(); err != nil {
			return fmt.Errorf("group %s: %w", g.Name, err)
		}
		groups[g.Name] = true
	}
	return nil
}

// Validate rejects negative limits.
func (l Limits) Validate() error {
	if l.Concurrency < 0 || l.RPM < 0 || l.TPM < 0 || l.QueueLimit < 0 ||
		l.MaxWait < 0 || l.LeaseTTL < 0 || l.FairnessWindow < 0 {
		return fmt.Errorf("%w: limits must not be negative", ErrInvalid)
	}
	return nil
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
