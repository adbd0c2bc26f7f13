package config

import (
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/weir-gateway/weir"
)

// fieldError is a problem with one field, named by its path in the file
// (`platform_models[2].platform`). It matches weir.ErrInvalid.
type fieldError struct {
	path string
	msg  string
}

func (e *fieldError) Error() string { return e.path + ": " + e.msg }
func (e *fieldError) Unwrap() error { return weir.ErrInvalid }

func invalidf(path, format string, args ...any) error {
	return &fieldError{path: path, msg: fmt.Sprintf(format, args...)}
}

// Validate reports the first problem in c, with its path: bad server or
// storage values, catalog entries without a name or defined twice,
// references to undefined platforms or platform models, and negative
// limits. The error matches weir.ErrInvalid.
func (c *Config) Validate() error {
	if err := c.Server.validate(); err != nil {
		return err
	}
	if err := c.Storage.validate(); err != nil {
		return err
	}

	platforms := map[string]bool{}
	for i, p := range c.Platforms {
		path := fmt.Sprintf("platforms[%d]", i)
		if err := p.validate(path); err != nil {
			return err
		}
		if platforms[p.Name] {
			return invalidf(path+".name", "platform %q defined twice", p.Name)
		}
		platforms[p.Name] = true
	}

	pms := map[string]bool{}
	for i, pm := range c.PlatformModels {
		path := fmt.Sprintf("platform_models[%d]", i)
		switch {
		case pm.Name == "":
			return invalidf(path+".name", "required")
		case pms[pm.Name]:
			return invalidf(path+".name", "platform model %q defined twice", pm.Name)
		case pm.Platform == "":
			return invalidf(path+".platform", "required")
		case !platforms[pm.Platform]:
			return invalidf(path+".platform", "unknown platform %q", pm.Platform)
		case pm.Upstream == "":
			return invalidf(path+".upstream", "required: the model name sent to the platform")
		}
		if err := validateLimits(path, []limit{
			{"concurrency", pm.Concurrency}, {"rpm", pm.RPM}, {"tpm", pm.TPM},
			{"queue_limit", int64(pm.QueueLimit)},
		}, []durationLimit{
			{"max_wait", pm.MaxWait}, {"lease_ttl", pm.LeaseTTL},
			{"fairness_window", pm.FairnessWindow},
		}); err != nil {
			return err
		}
		pms[pm.Name] = true
	}

	models := map[string]bool{}
	for i, m := range c.Models {
		path := fmt.Sprintf("models[%d]", i)
		switch {
		case m.Name == "":
			return invalidf(path+".name", "required")
		case models[m.Name]:
			return invalidf(path+".name", "model %q defined twice", m.Name)
		case !m.Kind.Valid():
			return invalidf(path+".kind", "unknown kind %q: want %s, %s, %s, %s or %s",
				m.Kind, weir.KindChat, weir.KindEmbeddings, weir.KindImages, weir.KindSpeech, weir.KindVideo)
		case len(m.Candidates) == 0:
			return invalidf(path+".candidates", "at least one candidate is required")
		}
		seen := map[string]bool{}
		for j, cd := range m.Candidates {
			cpath := fmt.Sprintf("%s.candidates[%d]", path, j)
			switch {
			case cd.PlatformModel == "":
				return invalidf(cpath+".platform_model", "required")
			case !pms[cd.PlatformModel]:
				return invalidf(cpath+".platform_model", "unknown platform model %q", cd.PlatformModel)
			case seen[cd.PlatformModel]:
				return invalidf(cpath+".platform_model", "%q listed twice", cd.PlatformModel)
			case cd.Weight < 0:
				return invalidf(cpath+".weight", "must not be negative")
			}
			seen[cd.PlatformModel] = true
		}
		models[m.Name] = true
	}

	groups := map[string]bool{}
	for i, g := range c.Groups {
		path := fmt.Sprintf("groups[%d]", i)
		switch {
		case g.Name == "":
			return invalidf(path+".name", "required")
		case groups[g.Name]:
			return invalidf(path+".name", "group %q defined twice", g.Name)
		}
		if err := validateLimits(path, []limit{
			{"concurrency", g.Concurrency}, {"rpm", g.RPM}, {"tpm", g.TPM},
			{"queue_limit", int64(g.QueueLimit)},
		}, []durationLimit{
			{"max_wait", g.MaxWait}, {"fairness_window", g.FairnessWindow},
		}); err != nil {
			return err
		}
		groups[g.Name] = true
	}
	if c.DefaultGroup == "" {
		return invalidf("default_group", "required")
	}
	return nil
}

func (s *Server) validate() error {
	if _, _, err := net.SplitHostPort(s.Listen); err != nil {
		return invalidf("server.listen", "%q is not host:port", s.Listen)
	}
	switch {
	case s.MaxBodyBytes <= 0:
		return invalidf("server.max_body_bytes", "must be positive")
	case s.DefaultMaxWait < 0:
		return invalidf("server.default_max_wait", "must not be negative")
	case s.ShutdownTimeout < 0:
		return invalidf("server.shutdown_timeout", "must not be negative")
	case s.ReadHeaderTimeout <= 0:
		return invalidf("server.read_header_timeout", "must be positive")
	case s.BodyTimeout <= 0:
		return invalidf("server.body_timeout", "must be positive")
	case s.IdleTimeout <= 0:
		return invalidf("server.idle_timeout", "must be positive")
	case s.RetryBudget < 1:
		return invalidf("server.retry_budget", "must be at least 1 (the first attempt counts)")
	case s.Cooldown.Failures < 0:
		return invalidf("server.cooldown.failures", "must not be negative (0 disables cooldown)")
	case s.Cooldown.Failures > 0 && s.Cooldown.Duration <= 0:
		return invalidf("server.cooldown.duration", "must be positive while cooldown.failures is set")
	case s.Cooldown.Duration < 0:
		return invalidf("server.cooldown.duration", "must not be negative")
	case s.UpstreamTimeout < 0:
		return invalidf("server.upstream_timeout", "must not be negative (0: no timeout)")
	case s.UpstreamIdleTimeout < 0:
		return invalidf("server.upstream_idle_timeout", "must not be negative (0: no timeout)")
	case s.UpstreamCallTimeout < 0:
		return invalidf("server.upstream_call_timeout", "must not be negative (0: no timeout)")
	case s.StreamWriteTimeout < 0:
		return invalidf("server.stream_write_timeout", "must not be negative (0: no timeout)")
	case s.MaxResponseBytes <= 0:
		return invalidf("server.max_response_bytes", "must be positive")
	case s.UsageFlushInterval <= 0:
		return invalidf("server.usage_flush_interval", "must be positive")
	}
	switch s.AdminLoopback {
	case "auto", "true", "false":
	default:
		return invalidf("server.admin_loopback", "%q: want auto, true or false", s.AdminLoopback)
	}
	switch s.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return invalidf("server.log_level", "unknown level %q: want debug, info, warn or error", s.LogLevel)
	}
	return nil
}

func (s *Storage) validate() error {
	switch {
	case s.Driver != "sqlite":
		return invalidf("storage.driver", "unknown driver %q: want sqlite", s.Driver)
	case s.Path == "":
		return invalidf("storage.path", "required")
	}
	return nil
}

func (p *Platform) validate(path string) error {
	switch {
	case p.Name == "":
		return invalidf(path+".name", "required")
	case p.Kind != "" && p.Kind != "openai": // "" is the default, openai
		return invalidf(path+".kind", "unknown kind %q: want openai", p.Kind)
	case p.BaseURL == "":
		return invalidf(path+".base_url", "required")
	case p.APIKeyEnv != "" && !validEnvName(p.APIKeyEnv):
		// Never echo the value: it may be a key pasted in by mistake.
		return invalidf(path+".api_key_env", "not an environment variable name; put the key in a variable and name the variable here")
	case p.Timeout < 0:
		return invalidf(path+".timeout", "must not be negative")
	case p.IdleTimeout < 0:
		return invalidf(path+".idle_timeout", "must not be negative")
	case p.CallTimeout < 0:
		return invalidf(path+".call_timeout", "must not be negative")
	}
	u, err := url.Parse(p.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return invalidf(path+".base_url", "%q is not an http or https URL", p.BaseURL)
	}
	return nil
}

type limit struct {
	name string
	v    int64
}

type durationLimit struct {
	name string
	v    time.Duration
}

func validateLimits(path string, limits []limit, durations []durationLimit) error {
	for _, l := range limits {
		if l.v < 0 {
			return invalidf(path+"."+l.name, "must not be negative (0 means no limit)")
		}
	}
	for _, d := range durations {
		if d.v < 0 {
			return invalidf(path+"."+d.name, "must not be negative (0 means no limit)")
		}
	}
	return nil
}
