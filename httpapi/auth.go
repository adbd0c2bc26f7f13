package httpapi

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/keys"
)

// keyCache remembers keys looked up by the hash of their secret for a short
// while, so that the store is not asked on every request. Unknown hashes are
// remembered too (bounded), so a client hammering with a bad key does not
// hammer the store.
type keyCache struct {
	ttl   time.Duration
	clock clock.Clock
	mu    sync.Mutex
	m     map[string]cachedKey
}

type cachedKey struct {
	key     weir.APIKey
	found   bool
	fetched time.Time
}

const maxCachedKeys = 100_000

func (c *keyCache) get(ctx context.Context, store weir.Store, hash string) (weir.APIKey, bool, error) {
	return c.lookup(ctx, hash, func() (weir.APIKey, error) { return store.KeyByHash(ctx, hash) })
}

// byID finds a key by id through the same cache (a task's key, planned
// once per task: 100,000 tasks of one key at start-up ask the store once).
func (c *keyCache) byID(ctx context.Context, store weir.Store, id string) (weir.APIKey, bool, error) {
	return c.lookup(ctx, "id:"+id, func() (weir.APIKey, error) { return store.KeyByID(ctx, id) })
}

func (c *keyCache) lookup(ctx context.Context, ck string, fetch func() (weir.APIKey, error)) (weir.APIKey, bool, error) {
	now := c.clock.Now()
	c.mu.Lock()
	if e, ok := c.m[ck]; ok && now.Sub(e.fetched) < c.ttl {
		c.mu.Unlock()
		return e.key, e.found, nil
	}
	c.mu.Unlock()
	k, err := fetch()
	found := err == nil
	if err != nil && !errors.Is(err, weir.ErrNotFound) {
		return weir.APIKey{}, false, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCachedKeys {
		c.m = make(map[string]cachedKey)
	}
	c.m[ck] = cachedKey{key: k, found: found, fetched: now}
	c.mu.Unlock()
	return k, found, nil
}

// authenticate finds the caller's key. Missing, unknown and revoked keys get
// the same 401, so a caller learns nothing about which keys exist.
func (s *Server) authenticate(r *http.Request) (weir.APIKey, *apiError) {
	secret := bearer(r)
	if secret == "" {
		secret = r.Header.Get("X-Api-Key")
	}
	denied := errorf(CodeUnauthorized, "", "invalid or missing API key")
	if secret == "" {
		return weir.APIKey{}, denied
	}
	k, found, err := s.keys.get(r.Context(), s.deps.Store, keys.Hash(secret))
	if err != nil {
		info(r.Context()).log().Error("key lookup failed", "error", err)
		return weir.APIKey{}, errorf(CodeInternal, "", "key lookup failed")
	}
	if !found || !k.Active() {
		return weir.APIKey{}, denied
	}
	return k, nil
}
