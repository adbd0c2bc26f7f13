package config

import (
	"fmt"
	"net"
	"strings"

	"github.com/weir-gateway/weir"
)

func invalidf(path, format string, args ...any) error {
	return &weir.FieldError{Path: path, Msg: fmt.Sprintf(format, args...)}
}

// Validate reports the first problem in c, with its path in the file: bad
// server or storage values, a platform's api_key_env that is not a
// variable name, no default group, then whatever weir.Catalog.Validate
// finds in the catalog the file makes (entries without a name or defined
// twice, references to undefined platforms or platform models, negative
// limits...). The error matches weir.ErrInvalid.
func (c *Config) Validate() error {
	if err := c.Server.validate(); err != nil {
		return err
	}
	if err := c.Storage.validate(); err != nil {
		return err
	}
	for i, p := range c.Platforms {
		if p.APIKeyEnv != "" && !validEnvName(p.APIKeyEnv) {
			// Never echo the value: it may be a key pasted in by mistake.
			return invalidf(fmt.Sprintf("platforms[%d].api_key_env", i),
				"not an environment variable name; put the key in a variable and name the variable here")
		}
	}
	if c.DefaultGroup == "" {
		return invalidf("default_group", "required")
	}
	// The catalog's entries are the file's, in the file's order, so the
	// paths of its errors are the file's.
	cat := c.toCatalog(func(string) (string, bool) { return "", false })
	return cat.Validate()
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
	case s.KeyCacheTTL <= 0:
		return invalidf("server.key_cache_ttl", "must be positive")
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
	switch s.Driver {
	case "sqlite":
		if s.Path == "" {
			return invalidf("storage.path", "required")
		}
	case "postgres":
		if strings.TrimSpace(s.DSN) == "" {
			return invalidf("storage.dsn", "required with driver postgres: give the database as postgres://user@host:5432/db (or set WEIR_STORAGE_DSN)")
		}
	default:
		return invalidf("storage.driver", "unknown driver %q: want sqlite or postgres", s.Driver)
	}
	return nil
}
