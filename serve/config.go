package serve

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/console"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/httpapi"
	"github.com/weir-gateway/weir/task"
)

// LoadConfig loads the config file at path; a missing one says where to
// find one.
func LoadConfig(path string) (*config.Config, error) {
	cfg, err := config.Load(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w (give the config file with -c FILE; examples/weir.yaml documents every setting)", err)
	}
	return cfg, err
}

// gatewayConfig is the gateway's part of the server settings.
func gatewayConfig(s config.Server) gateway.Config {
	return gateway.Config{
		UpstreamTimeout:     s.UpstreamTimeout,
		UpstreamIdleTimeout: s.UpstreamIdleTimeout,
		UpstreamCallTimeout: s.UpstreamCallTimeout,
		RetryBudget:         s.RetryBudget,
		MaxResponseBytes:    s.MaxResponseBytes,
		KeyCacheTTL:         s.KeyCacheTTL,
		MaxEndUserBudgets:   s.MaxEndUserBudgets,
	}
}

// apiConfig is the HTTP API's part of the config.
func apiConfig(cfg *config.Config) httpapi.Config {
	s := cfg.Server
	return httpapi.Config{
		MaxBodyBytes:       s.MaxBodyBytes,
		MaxUploadBytes:     s.MaxUploadBytes,
		DefaultMaxWait:     s.DefaultMaxWait,
		StreamWriteTimeout: s.StreamWriteTimeout,
		AdminToken:         s.AdminToken,
		AdminLoopback:      s.AdminLoopbackTrusted(),
		PublicHost:         publicHost(s.PublicURL),
		MetricsAuth:        s.MetricsAuth,
		ReadHeaderTimeout:  s.ReadHeaderTimeout,
		BodyTimeout:        s.BodyTimeout,
		IdleTimeout:        s.IdleTimeout,
		NoAccessLog:        !s.AccessLog,
	}
}

// consoleConfig is the web console's part of the config.
func consoleConfig(cfg *config.Config) console.Config {
	return console.Config{
		AdminToken:   cfg.Server.AdminToken,
		Loopback:     cfg.Server.AdminLoopbackTrusted(),
		DefaultGroup: cfg.DefaultGroup,
		PublicURL:    cfg.Server.PublicURL,
	}
}

// taskConfig is the task service's part of the config.
func taskConfig(cfg *config.Config) task.Config {
	t := cfg.Tasks
	return task.Config{
		Workers:     t.Workers,
		QueueLimit:  t.QueueLimit,
		MaxWait:     t.MaxWait,
		PollMin:     t.PollMin,
		PollMax:     t.PollMax,
		MaxAttempts: t.MaxAttempts,
		LeaseTTL:    t.LeaseTTL,
		RescueAfter: t.RescueAfter,
		Retention:   t.Retention,
	}
}
