package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/weir-gateway/weir"
)

func invalidf(path, format string, args ...any) error {
	return &weir.FieldError{Path: path, Msg: fmt.Sprintf(format, args...)}
}

// Validate reports the first problem in c, with its path in the file: bad
// server, storage or fleet values, a platform's api_key_env that is not a
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
	if err := c.Edge.validate(); err != nil {
		return err
	}
	if err := c.Fleet.validate(c.Storage.Driver == "postgres"); err != nil {
		return err
	}
	if err := c.Spend.validate(); err != nil {
		return err
	}
	if err := c.Tasks.validate(); err != nil {
		return err
	}
	for i, p := range c.Platforms {
		if p.APIKeyEnv != "" && !validEnvName(p.APIKeyEnv) {
			// Never echo the value: it may be a key pasted in by mistake.
			return invalidf(fmt.Sprintf("platforms[%d].api_key_env", i),
				"not an environment variable name; put the key in a variable and name the variable here")
		}
		for _, env := range []struct{ field, name string }{
			{"access_key_id_env", p.AccessKeyIDEnv}, {"secret_access_key_env", p.SecretAccessKeyEnv}, {"session_token_env", p.SessionTokenEnv},
			{"client_secret_env", p.ClientSecretEnv},
		} {
			if env.name != "" && !validEnvName(env.name) {
				return invalidf(fmt.Sprintf("platforms[%d].%s", i, env.field),
					"not an environment variable name; put the key in a variable and name the variable here")
			}
		}
		switch {
		case (p.AccessKeyIDEnv == "") != (p.SecretAccessKeyEnv == ""):
			return invalidf(fmt.Sprintf("platforms[%d].secret_access_key_env", i),
				"access_key_id_env and secret_access_key_env name an AWS key pair: both or neither")
		case p.SessionTokenEnv != "" && p.AccessKeyIDEnv == "":
			return invalidf(fmt.Sprintf("platforms[%d].session_token_env", i), "a session token goes with access_key_id_env and secret_access_key_env")
		case p.AccessKeyIDEnv != "" && p.APIKeyEnv != "":
			return invalidf(fmt.Sprintf("platforms[%d].api_key_env", i), "a bedrock platform signs with its key pair or sends an API key, not both")
		case p.Kind != "bedrock" && p.Kind != "" && (p.Region != "" || p.AccessKeyIDEnv != ""):
			return invalidf(fmt.Sprintf("platforms[%d].region", i), "region and AWS keys are a bedrock platform's")
		case p.Kind != "azure" && p.Kind != "" && (p.TenantID != "" || p.ClientID != "" || p.ClientSecretEnv != "" || p.TokenURL != ""):
			return invalidf(fmt.Sprintf("platforms[%d].tenant_id", i), "tenant_id, client_id, client_secret_env and token_url are an azure platform's (Microsoft Entra ID)")
		case (p.TenantID == "") != (p.ClientID == "") || (p.TenantID == "") != (p.ClientSecretEnv == ""):
			return invalidf(fmt.Sprintf("platforms[%d].client_secret_env", i), "tenant_id, client_id and client_secret_env sign in with Microsoft Entra ID: all three or none")
		case p.TokenURL != "" && p.TenantID == "":
			return invalidf(fmt.Sprintf("platforms[%d].token_url", i), "a token_url goes with tenant_id, client_id and client_secret_env")
		case p.TenantID != "" && p.APIKeyEnv != "":
			return invalidf(fmt.Sprintf("platforms[%d].api_key_env", i), "an azure platform signs in with Microsoft Entra ID or sends an API key, not both")
		case p.Responses != "" && p.Responses != "native" && p.Responses != "translate":
			return invalidf(fmt.Sprintf("platforms[%d].responses", i), "%q: want native or translate", p.Responses)
		case p.Responses != "" && p.Kind != "" && !slices.Contains(weir.ResponsesKinds, p.Kind):
			return invalidf(fmt.Sprintf("platforms[%d].responses", i), "only an openai or azure platform may speak the Responses API; a %s platform is always sent it translated", p.Kind)
		}
	}
	if c.DefaultGroup == "" {
		return invalidf("default_group", "required")
	}
	if err := c.validateBudgets(); err != nil {
		return err
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
	case s.MaxUploadBytes < 0:
		return invalidf("server.max_upload_bytes", "must not be negative (0: the default)")
	case s.DefaultMaxWait < 0 && s.DefaultMaxWait != NoBound:
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
	case s.UpstreamTimeout < 0 && s.UpstreamTimeout != NoBound:
		return invalidf("server.upstream_timeout", "must not be negative (0: no timeout)")
	case s.UpstreamIdleTimeout < 0 && s.UpstreamIdleTimeout != NoBound:
		return invalidf("server.upstream_idle_timeout", "must not be negative (0: no timeout)")
	case s.UpstreamCallTimeout < 0 && s.UpstreamCallTimeout != NoBound:
		return invalidf("server.upstream_call_timeout", "must not be negative (0: no timeout)")
	case s.StreamWriteTimeout < 0 && s.StreamWriteTimeout != NoBound:
		return invalidf("server.stream_write_timeout", "must not be negative (0: no timeout)")
	case s.MaxResponseBytes <= 0:
		return invalidf("server.max_response_bytes", "must be positive")
	case s.HeapFloor < 0:
		return invalidf("server.heap_floor", "must not be negative (0 for none)")
	case s.UsageFlushInterval <= 0:
		return invalidf("server.usage_flush_interval", "must be positive")
	case s.KeyCacheTTL <= 0:
		return invalidf("server.key_cache_ttl", "must be positive")
	case s.MaxEndUserBudgets <= 0:
		return invalidf("server.max_end_user_budgets", "must be positive")
	}
	switch s.AdminLoopback {
	case "auto", "true", "false":
	default:
		return invalidf("server.admin_loopback", "%q: want auto, true or false", s.AdminLoopback)
	}
	if s.PublicURL != "" {
		if err := validPublicURL(s.PublicURL); errors.Is(err, errUserInfo) {
			return invalidf("server.public_url", "%v", err) // never echo a password
		} else if err != nil {
			return invalidf("server.public_url", "%q: %v", s.PublicURL, err)
		}
	}
	switch s.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return invalidf("server.log_level", "unknown level %q: want debug, info, warn or error", s.LogLevel)
	}
	return nil
}

var errUserInfo = errors.New("a user or password has no place in a public URL")

// validPublicURL checks a public base URL: absolute http or https, a
// host, and nothing the console could not be served under (a path, a
// query, a fragment, user info).
func validPublicURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("want an http:// or https:// URL")
	case u.Hostname() == "":
		return errors.New("no host")
	case u.User != nil:
		return errUserInfo
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return errors.New("want the base URL only: the console is served at its root, no path, query or fragment")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %q is not a port", p)
		}
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

const (
	// maxReplicaBytes bounds a replica id, which the fleet stores and
	// logs; the fleet itself takes up to 200 bytes.
	maxReplicaBytes = 100
	// minFleetSecretBytes is the shortest fleet secret: it is all that
	// keeps a stranger who reaches a leader's fleet listener out.
	minFleetSecretBytes = 16
	// minFleetTimeout is the shortest term_ttl and heartbeat_timeout: a
	// database round trip or a pause of the process must not lapse them.
	minFleetTimeout = time.Second
)

// validate checks the fleet section in full when the replica is on
// PostgreSQL (postgres); on sqlite the section is not used, and only
// durations that can mean nothing, negative ones, are refused.
func (f *Fleet) validate(postgres bool) error {
	if f.Unavailable != "" && f.Unavailable != UnavailableClosed && f.Unavailable != UnavailableOpen {
		return invalidf("fleet.unavailable", "%q is not closed or open", f.Unavailable)
	}
	if f.ReleaseSilent != "" && f.ReleaseSilent != ReleaseSilentCallTimeout && f.ReleaseSilent != ReleaseSilentHeartbeat {
		return invalidf("fleet.release_silent", "%q is not call_timeout or heartbeat", f.ReleaseSilent)
	}
	if !postgres {
		switch {
		case f.TermTTL < 0:
			return invalidf("fleet.term_ttl", "must not be negative")
		case f.HeartbeatTimeout < 0:
			return invalidf("fleet.heartbeat_timeout", "must not be negative")
		case f.Poll < 0:
			return invalidf("fleet.poll", "must not be negative")
		}
		return nil
	}
	switch {
	case f.TermTTL < minFleetTimeout:
		return invalidf("fleet.term_ttl", "%v is too short: give at least %v (a Go duration such as \"10s\")", f.TermTTL, minFleetTimeout)
	case f.HeartbeatTimeout < minFleetTimeout:
		return invalidf("fleet.heartbeat_timeout", "%v is too short: give at least %v (a Go duration such as \"6s\")", f.HeartbeatTimeout, minFleetTimeout)
	case f.Poll <= 0:
		return invalidf("fleet.poll", "must be positive (a Go duration such as \"5s\")")
	case f.Poll > f.TermTTL:
		return invalidf("fleet.poll", "%v is longer than fleet.term_ttl %v: a lapsed term could go unseen that long; give at most term_ttl", f.Poll, f.TermTTL)
	}
	if f.Replica != "" {
		switch {
		case len(f.Replica) > maxReplicaBytes:
			return invalidf("fleet.replica", "%d bytes, more than %d: give a shorter id, or none to have one made", len(f.Replica), maxReplicaBytes)
		case !utf8.ValidString(f.Replica):
			return invalidf("fleet.replica", "%q is not UTF-8", f.Replica)
		case strings.ContainsFunc(f.Replica, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
			return invalidf("fleet.replica", "%q contains whitespace or a control character: give an id such as \"weir-1\"", f.Replica)
		}
	}
	if f.Listen != "" {
		if _, _, err := net.SplitHostPort(f.Listen); err != nil {
			return invalidf("fleet.listen", "%q is not host:port (\":0\": every interface, a free port)", f.Listen)
		}
	}
	if f.Advertise != "" {
		if err := checkAdvertise(f.Advertise); err != nil {
			return err
		}
	}
	if f.RelayAdvertise != "" {
		u, err := url.Parse(f.RelayAdvertise)
		if err == nil && u.User != nil {
			// Never echo it: it holds a credential.
			return invalidf("fleet.relay_advertise", "a base URL without a user or password: the replicas authenticate with the fleet's secret")
		}
		if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" {
			return invalidf("fleet.relay_advertise", "%q is not a base URL such as http://weir-1.internal:8080", f.RelayAdvertise)
		}
		if host := u.Hostname(); unspecifiedHost(host) {
			return invalidf("fleet.relay_advertise", "%q has no host the others can reach: give this replica's name or address as they reach it", f.RelayAdvertise)
		}
	}
	if f.Secret != "" && len(f.Secret) < minFleetSecretBytes {
		// Never echo the value: it is a credential.
		return invalidf("fleet.secret", "%d bytes, fewer than %d: the secret authenticates the replicas to each other, so give at least %d random bytes (or none, to use the one kept in the database)",
			len(f.Secret), minFleetSecretBytes, minFleetSecretBytes)
	}
	return nil
}

// unspecifiedHost reports whether host names no machine the other
// replicas can reach: none, or the unspecified address.
func unspecifiedHost(host string) bool {
	ip, err := netip.ParseAddr(host)
	return host == "" || err == nil && ip.IsUnspecified()
}

// checkAdvertise checks that addr is something the other replicas can
// dial: a host, which is not the unspecified address, and a port from 1
// to 65535.
func checkAdvertise(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return invalidf("fleet.advertise", "%q is not host:port", addr)
	}
	if unspecifiedHost(host) {
		return invalidf("fleet.advertise", "%q has no host the others can dial: give this replica's name or address as they reach it", addr)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return invalidf("fleet.advertise", "%q: the port must be a number from 1 to 65535", addr)
	}
	return nil
}

// validate checks the edge section.
func (e *Edge) validate() error {
	switch {
	case e.Listen != "":
		if _, _, err := net.SplitHostPort(e.Listen); err != nil {
			return invalidf("edge.listen", "%q is not host:port (e.g. \"0.0.0.0:8443\"; empty: no edge listener)", e.Listen)
		}
	}
	switch {
	case (e.TLSCert == "") != (e.TLSKey == ""):
		return invalidf("edge.tls_cert", "tls_cert and tls_key go together: give both, or neither for plaintext")
	case e.HeartbeatInterval <= 0:
		return invalidf("edge.heartbeat_interval", "must be positive (a Go duration such as \"2s\")")
	case e.HeartbeatTimeout <= e.HeartbeatInterval:
		return invalidf("edge.heartbeat_timeout", "%v is not longer than edge.heartbeat_interval %v: one late heartbeat would declare a node gone", e.HeartbeatTimeout, e.HeartbeatInterval)
	case e.ForgetAfter < 0:
		return invalidf("edge.forget_after", "%v is negative (a Go duration such as \"24h\"; 0: never forget a gone node)", e.ForgetAfter)
	}
	return nil
}
