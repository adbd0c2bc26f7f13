package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// EntraScope is the scope of the access tokens an azure platform signs in
// with: Azure AI services' (Azure OpenAI's) data plane.
const EntraScope = "https://cognitiveservices.azure.com/.default"

// DefaultEntraTokenTimeout bounds one token request unless EntraConfig
// names another bound: a sign-in is a small exchange, and a call that
// waits on it holds its queue slot.
const DefaultEntraTokenTimeout = 10 * time.Second

// EntraConfig is a service principal's client credentials, with which an
// azure platform signs in to Microsoft Entra ID instead of sending a key.
type EntraConfig struct {
	TenantID, ClientID, ClientSecret string
	// TokenURL is the token endpoint; "":
	// https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token (other
	// clouds, and tests, name theirs).
	TokenURL string
	// Client sends the token requests (its transport; the timeout is
	// Timeout); nil: http.DefaultClient's.
	Client *http.Client
	// Timeout bounds one token request; 0: DefaultEntraTokenTimeout.
	Timeout time.Duration
}

// EntraTokens are one platform's access tokens: oauth2's caching source
// over the client credentials grant, so that the platform's calls share
// a token and a new one is fetched shortly before it expires.
type EntraTokens struct {
	src oauth2.TokenSource
	// last is the token the source last gave, which a call takes as it
	// is while it is valid, without waiting on the source.
	last atomic.Pointer[oauth2.Token]
}

// NewEntraTokens returns the token source of cfg's service principal.
// No token is fetched until a call needs one.
func NewEntraTokens(cfg EntraConfig) *EntraTokens {
	tokenURL := cfg.TokenURL
	if tokenURL == "" {
		tokenURL = "https://login.microsoftonline.com/" + url.PathEscape(cfg.TenantID) + "/oauth2/v2.0/token"
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultEntraTokenTimeout
	}
	client := &http.Client{Timeout: timeout}
	if cfg.Client != nil {
		client.Transport = cfg.Client.Transport
	}
	cc := &clientcredentials.Config{
		ClientID:     cfg.ClientID,
		ClientSecret: cfg.ClientSecret,
		TokenURL:     tokenURL,
		Scopes:       []string{EntraScope},
		// Entra takes the secret in the form; naming the style spares
		// oauth2's probe of the header style first.
		AuthStyle: oauth2.AuthStyleInParams,
	}
	// The source keeps this context for every fetch: it carries the
	// bounded client, and outlives any one call.
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, client)
	return &EntraTokens{src: cc.TokenSource(ctx)}
}

// token returns a valid access token, the cached one while it lasts (at
// once, from last). A fetch runs apart from the call, bounded by the source's client, so
// that the call waits for it no longer than ctx allows; a fetch the call
// gave up on still fills the cache for the calls after it. A failed
// fetch is the platform's credential refused: the operator's to fix, and
// the next candidate serves.
func (e *EntraTokens) token(ctx context.Context) (string, error) {
	if t := e.last.Load(); t.Valid() {
		return t.AccessToken, nil
	}
	type result struct {
		tok *oauth2.Token
		err error
	}
	done := make(chan result, 1)
	go func() {
		tok, err := e.src.Token()
		done <- result{tok, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if r.err == nil && r.tok.AccessToken == "" {
		r.err = errors.New("the token endpoint answered no access token")
	}
	if r.err != nil {
		status := http.StatusUnauthorized
		if re, ok := errors.AsType[*oauth2.RetrieveError](r.err); ok && re.Response != nil {
			status = re.Response.StatusCode
		}
		return "", &Error{Status: status, Credential: true, Err: fmt.Errorf("entra id sign-in: %w", r.err)}
	}
	e.last.Store(r.tok)
	return r.tok.AccessToken, nil
}
