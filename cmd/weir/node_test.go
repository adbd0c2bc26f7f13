package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir/config"
)

func TestAgentConfigFromExample(t *testing.T) {
	t.Setenv("WEIR_NODE_TOKEN", "wn-from-env")
	cfg, err := config.LoadNode("../../examples/node.yaml")
	if err != nil {
		t.Fatal(err)
	}
	nc, err := agentConfig(cfg, "weir test")
	if err != nil {
		t.Fatal(err)
	}
	if nc.Token != "wn-from-env" || nc.Gateway != cfg.Gateway || nc.TLS != nil || nc.DrainTimeout != 30*time.Second ||
		nc.StallTimeout != time.Minute || nc.Version != "weir test" {
		t.Errorf("config %+v", nc)
	}
	if len(nc.Providers) != 1 || nc.Providers[0].URL != "http://127.0.0.1:9090/v1" || len(nc.Providers[0].Models) != 2 ||
		nc.Providers[0].Models[1].Runtime != "text-embedding-3-small" {
		t.Errorf("providers %+v", nc.Providers)
	}
}

func TestAgentConfigTLS(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &config.NodeConfig{TLS: &config.NodeTLS{CA: notPEM, ServerName: "gw"}}
	if _, err := agentConfig(cfg, ""); err == nil || !strings.Contains(err.Error(), "tls.ca") {
		t.Errorf("err = %v; want tls.ca named", err)
	}
	cfg.TLS.CA = ""
	nc, err := agentConfig(cfg, "")
	if err != nil || nc.TLS == nil || nc.TLS.ServerName != "gw" || nc.TLS.RootCAs != nil {
		t.Errorf("tls %+v, %v; want the system's roots and the server name", nc.TLS, err)
	}
	cfg.TLS.CA = filepath.Join(dir, "none.pem")
	if _, err := agentConfig(cfg, ""); err == nil {
		t.Error("a missing CA file was taken")
	}
}
