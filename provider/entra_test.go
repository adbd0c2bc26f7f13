package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weir-gateway/weir/provider/mock"
)

// tokenEndpoint is an httptest Entra token endpoint: it checks the
// client credentials grant, counts the tokens it hands out and answers
// each with expiresIn seconds of life, or with status when that is set.
type tokenEndpoint struct {
	srv       *httptest.Server
	fetched   atomic.Int64
	expiresIn int
	status    int
	// hold, when set, keeps each request until it is closed.
	hold chan struct{}
	// arrived, when set, hears of each request as it comes.
	arrived chan struct{}
}

func newTokenEndpoint(t testing.TB, expiresIn int) *tokenEndpoint {
	t.Helper()
	te := &tokenEndpoint{expiresIn: expiresIn}
	te.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if te.arrived != nil {
			te.arrived <- struct{}{}
		}
		if te.hold != nil {
			<-te.hold
		}
		if err := r.ParseForm(); err != nil || r.Method != http.MethodPost || r.URL.Path != "/tenant-1/oauth2/v2.0/token" ||
			r.PostForm.Get("grant_type") != "client_credentials" || r.PostForm.Get("client_id") != "client-1" ||
			r.PostForm.Get("client_secret") != "secret-1" || r.PostForm.Get("scope") != EntraScope {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":"invalid_request","error_description":"%s %s %v"}`, r.Method, r.URL.Path, r.PostForm)
			return
		}
		if te.status != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(te.status)
			fmt.Fprint(w, `{"error":"invalid_client","error_description":"AADSTS7000215: Invalid client secret provided."}`)
			return
		}
		n := te.fetched.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"token_type":"Bearer","expires_in":%d,"access_token":"token-%d"}`, te.expiresIn, n)
	}))
	t.Cleanup(te.srv.Close)
	return te
}

func (te *tokenEndpoint) config() EntraConfig {
	return EntraConfig{TenantID: "tenant-1", ClientID: "client-1", ClientSecret: "secret-1",
		TokenURL: te.srv.URL + "/tenant-1/oauth2/v2.0/token"}
}

// setupEntra is an azure adapter signed in at te, against the mock.
func setupEntra(t *testing.T, te *tokenEndpoint) azureBundle {
	t.Helper()
	b := setupAzure(t, mock.Config{Models: []string{"chat-dep"}})
	b.ad.APIKey = ""
	b.ad.Entra = NewEntraTokens(te.config())
	return b
}

const entraChat = `{"model":"chat-dep","messages":[{"role":"user","content":"hi"}]}`

// TestAzureEntraSharesOneToken: the platform's calls, at once and one
// after another, share one token, sent as a bearer token and never with
// api-key.
func TestAzureEntraSharesOneToken(t *testing.T) {
	t.Parallel()
	te := newTokenEndpoint(t, 3600)
	b := setupEntra(t, te)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			resp, err := b.ad.Do(t.Context(), Call{Path: "/chat/completions", Body: []byte(entraChat)})
			if err != nil {
				errs <- err
				return
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for range 3 {
		resp, err := b.ad.Do(t.Context(), Call{Path: "/chat/completions", Body: []byte(entraChat)})
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, resp)
	}
	if n := te.fetched.Load(); n != 1 {
		t.Fatalf("fetched %d tokens for 11 calls; want 1", n)
	}
	req := b.rec.last(t)
	if req.Header.Get("Authorization") != "Bearer token-1" || req.Header.Get("Api-Key") != "" {
		t.Fatalf("headers %v", req.Header)
	}
}

// TestAzureEntraRefreshesBeforeExpiry: a token about to expire is not
// sent; the next call fetches a new one. oauth2 reads the wall clock, so
// the tokens here live less than its early-refresh window: each is
// stale as soon as it is handed out.
func TestAzureEntraRefreshesBeforeExpiry(t *testing.T) {
	t.Parallel()
	te := newTokenEndpoint(t, 5)
	b := setupEntra(t, te)
	for i := 1; i <= 3; i++ {
		resp, err := b.ad.Do(t.Context(), Call{Path: "/chat/completions", Body: []byte(entraChat)})
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, resp)
		if got, want := b.rec.last(t).Header.Get("Authorization"), fmt.Sprintf("Bearer token-%d", i); got != want {
			t.Fatalf("call %d sent %q; want %q", i, got, want)
		}
	}
	if n := te.fetched.Load(); n != 3 {
		t.Fatalf("fetched %d tokens; want 3", n)
	}
}

// TestAzureEntraRefusedSignIn: a sign-in Entra refuses is the platform's
// credential refused, retryable on the next candidate, its words kept
// from the client, and the upstream is not called.
func TestAzureEntraRefusedSignIn(t *testing.T) {
	t.Parallel()
	te := newTokenEndpoint(t, 3600)
	te.status = http.StatusUnauthorized
	b := setupEntra(t, te)
	pe := upstreamErr(t, b.ad, Call{Path: "/chat/completions", Body: []byte(entraChat)})
	if !pe.Credential || !pe.Retryable() || pe.Body != nil || pe.Status != http.StatusUnauthorized {
		t.Fatalf("error %+v; want a refused credential", pe)
	}
	if n := len(b.rec.reqs); n != 0 {
		t.Fatalf("the upstream was called %d times without a token", n)
	}

	// An endpoint that cannot be reached is the platform's to fix too.
	cfg := te.config()
	cfg.TokenURL = "http://127.0.0.1:1/token"
	b.ad.Entra = NewEntraTokens(cfg)
	pe = upstreamErr(t, b.ad, Call{Path: "/chat/completions", Body: []byte(entraChat)})
	if !pe.Credential || !pe.Retryable() {
		t.Fatalf("error %+v; want a refused credential", pe)
	}
}

// TestAzureEntraCallLeavesSlowSignIn: a call waits for a slow sign-in no
// longer than its context; the fetch it left still serves the next call.
func TestAzureEntraCallLeavesSlowSignIn(t *testing.T) {
	t.Parallel()
	te := newTokenEndpoint(t, 3600)
	te.hold, te.arrived = make(chan struct{}), make(chan struct{}, 1)
	b := setupEntra(t, te)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := b.ad.Do(ctx, Call{Path: "/chat/completions", Body: []byte(entraChat)})
		errc <- err
	}()
	<-te.arrived
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v; want the call's context canceled", err)
	}
	close(te.hold)
	resp, err := b.ad.Do(t.Context(), Call{Path: "/chat/completions", Body: []byte(entraChat)})
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if n := te.fetched.Load(); n != 1 || b.rec.last(t).Header.Get("Authorization") != "Bearer token-1" {
		t.Fatalf("fetched %d tokens, sent %q", n, b.rec.last(t).Header.Get("Authorization"))
	}
}

// TestEntraDefaultTokenURL: with no token_url, the token comes from the
// tenant's endpoint on Microsoft's public cloud.
func TestEntraDefaultTokenURL(t *testing.T) {
	t.Parallel()
	var got string
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r.URL.String()
		return nil, errors.New("offline")
	})
	e := NewEntraTokens(EntraConfig{TenantID: "tenant-1", ClientID: "c", ClientSecret: "s", Client: &http.Client{Transport: rt}})
	if _, err := e.token(t.Context()); err == nil {
		t.Fatal("a token from nowhere")
	}
	if got != "https://login.microsoftonline.com/tenant-1/oauth2/v2.0/token" {
		t.Fatalf("token requested from %q", got)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
