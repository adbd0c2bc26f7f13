package gateway

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weir-gateway/weir"
)

// TestServeAzureEntra: an azure platform signed in with Microsoft Entra
// ID sends its calls a bearer token it fetched once; a sign-in Entra
// refuses is the platform's credential refused, and the next candidate
// serves the request.
func TestServeAzureEntra(t *testing.T) {
	t.Parallel()
	var fetched atomic.Int64
	var refuse atomic.Bool
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if refuse.Load() || r.FormValue("client_secret") != "s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client"}`)
			return
		}
		fmt.Fprintf(w, `{"token_type":"Bearer","expires_in":3600,"access_token":"token-%d"}`, fetched.Add(1))
	}))
	t.Cleanup(tokens.Close)
	refuse.Store(true)
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) {
		c.Platforms[0] = weir.Platform{Name: "up", Kind: "azure", BaseURL: strings.TrimSuffix(c.Platforms[1].BaseURL, "/v1"),
			TenantID: "tenant-1", ClientID: "client-1", ClientSecret: "s3cret", TokenURL: tokens.URL + "/tenant-1/oauth2/v2.0/token"}
	}})

	c := b.chat(t)
	if err := b.svc.Serve(t.Context(), c, &recordedAnswer{}); err != nil {
		t.Fatal(err)
	}
	if c.Usage.PlatformModel != "up2/m" || c.Usage.Outcome != "ok" {
		t.Fatalf("served by %s (%s); want up2/m after up's sign-in was refused", c.Usage.PlatformModel, c.Usage.Outcome)
	}
	if l := b.logs.String(); !strings.Contains(l, "refused its credential") || strings.Contains(l, "s3cret") {
		t.Fatalf("logs: %s", l)
	}

	refuse.Store(false)
	for range 3 {
		c := b.chat(t)
		if err := b.svc.Serve(t.Context(), c, &recordedAnswer{}); err != nil {
			t.Fatal(err)
		}
		if c.Usage.PlatformModel != "up/m" {
			t.Fatalf("served by %s; want up/m", c.Usage.PlatformModel)
		}
	}
	if n := fetched.Load(); n != 1 {
		t.Fatalf("fetched %d tokens for 3 calls; want 1", n)
	}
}
