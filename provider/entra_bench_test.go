package provider

import (
	"context"
	"testing"
)

// BenchmarkEntraCachedToken is a call's token while the cached one is
// valid: what every azure call on Entra ID pays.
func BenchmarkEntraCachedToken(b *testing.B) {
	te := newTokenEndpoint(b, 3600)
	e := NewEntraTokens(te.config())
	ctx := context.Background()
	if _, err := e.token(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.token(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
