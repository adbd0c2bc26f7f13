package gateway

import (
	"fmt"
	"testing"

	"github.com/weir-gateway/weir/provider"
)

// Span names are made once per operation and model, up to a bound past
// which each is made anew, and always read "{operation} {model}".
func TestSpanNameTable(t *testing.T) {
	tbl := &spanNameTable{names: map[string]map[string]string{}}
	for i := range maxSpanNames + 10 {
		model := fmt.Sprintf("model-%d", i)
		for range 2 {
			if got := tbl.name("chat", model); got != "chat "+model {
				t.Fatalf("name(chat, %s) = %q", model, got)
			}
		}
	}
	if tbl.n != maxSpanNames {
		t.Errorf("table holds %d names, want the bound %d", tbl.n, maxSpanNames)
	}
	if got := tbl.name("embeddings", "model-1"); got != "embeddings model-1" {
		t.Errorf("name(embeddings, model-1) = %q", got)
	}
}

func TestServerAddress(t *testing.T) {
	for _, tc := range []struct {
		cfg  provider.Platform
		want string
	}{
		{provider.Platform{Kind: "openai", BaseURL: "https://api.openai.com/v1"}, "api.openai.com"},
		{provider.Platform{Kind: "openai", BaseURL: "http://127.0.0.1:8080/v1"}, "127.0.0.1"},
		{provider.Platform{Kind: "bedrock", Region: "eu-west-1"}, "bedrock-runtime.eu-west-1.amazonaws.com"},
		{provider.Platform{Kind: "bedrock", BaseURL: "http://localhost:9/", Region: "eu-west-1"}, "localhost"},
		{provider.Platform{Kind: "openai", BaseURL: "::bad"}, ""},
	} {
		if got := serverAddress(tc.cfg); got != tc.want {
			t.Errorf("serverAddress(%+v) = %q, want %q", tc.cfg, got, tc.want)
		}
	}
}
