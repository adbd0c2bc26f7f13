package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/clock"
)

// KeyStore is where keys are looked up; weir.Store implements it.
type KeyStore interface {
	// KeyByHash finds a key by the hash of its secret, revoked or not.
	KeyByHash(ctx context.Context, hash string) (weir.APIKey, error)
	KeyByID(ctx context.Context, id string) (weir.APIKey, error)
}

// KeyByHash finds the key whose secret hashes to hash, through the cache;
// found is false for a key that does not exist. A revoked key is found:
// whether it may be used is the caller's to check.
func (s *Service) KeyByHash(ctx context.Context, hash string) (k weir.APIKey, found bool, err error) {
	return s.keyByHash(ctx, []byte(hash))
}

// keyByHash is KeyByHash of a hash as bytes: a cached key costs no
// allocation.
func (s *Service) keyByHash(ctx context.Context, hash []byte) (weir.APIKey, bool, error) {
	return s.keys.lookup(ctx, hash, func() (weir.APIKey, error) { return s.deps.Keys.KeyByHash(ctx, string(hash)) })
}

// keyBySecret is keyByHash of the secret whose SHA-256 is sum. Its
// cache entry is keyed by the sum's bytes, not their hex, so that a
// cached key costs no hex encoding; the store is asked by the hex.
func (s *Service) keyBySecret(ctx context.Context, sum [sha256.Size]byte) (weir.APIKey, bool, error) {
	var ck [len(secretCacheKey) + sha256.Size]byte
	copy(ck[copy(ck[:], secretCacheKey):], sum[:])
	return s.keys.lookup(ctx, ck[:], func() (weir.APIKey, error) { return s.deps.Keys.KeyByHash(ctx, hex.EncodeToString(sum[:])) })
}

// secretCacheKey starts the key cache's entries of keyBySecret, which no
// hex hash (keyByHash's) or "id:" entry (keyByID's) does.
const secretCacheKey = "h:"

// keyByID finds a key by id through the same cache (a task's key, planned
// once per task: 100,000 tasks of one key at start-up ask the store once).
func (s *Service) keyByID(ctx context.Context, id string) (weir.APIKey, bool, error) {
	return s.keys.lookup(ctx, []byte("id:"+id), func() (weir.APIKey, error) { return s.deps.Keys.KeyByID(ctx, id) })
}

// keyCache remembers keys looked up for a short while, so that the store
// is not asked on every request. Unknown keys are remembered too
// (bounded), so a client hammering with a bad key does not hammer the
// store.
//
// When the store cannot answer (PostgreSQL restarting, a failover), an
// entry past its TTL but younger than keyStaleIfError answers instead:
// callers seen in the last minutes keep being served through a database
// blip. A revocation is not missed by this, since nothing could have read
// it while the store was down.
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

// keyStaleIfError is how old a cached key may be and still answer while
// the store fails.
const keyStaleIfError = 10 * time.Minute

func (c *keyCache) lookup(ctx context.Context, ck []byte, fetch func() (weir.APIKey, error)) (weir.APIKey, bool, error) {
	now := c.clock.Now()
	c.mu.Lock()
	e, cached := c.m[string(ck)]
	c.mu.Unlock()
	if cached && now.Sub(e.fetched) < c.ttl {
		return e.key, e.found, nil
	}
	return c.fetch(ck, fetch, now, &e, cached)
}

// fetch is lookup's answer when ck's entry e (cached: it exists) is past
// its TTL or missing: fetched and cached. It is a function of its own so
// that lookup's frame, on every request's way to the queue, is small.
//
//go:noinline
func (c *keyCache) fetch(ck []byte, fetch func() (weir.APIKey, error), now time.Time, e *cachedKey, cached bool) (weir.APIKey, bool, error) {
	k, err := fetch()
	found := err == nil
	if err != nil && !errors.Is(err, weir.ErrNotFound) {
		if cached && now.Sub(e.fetched) < keyStaleIfError {
			return e.key, e.found, nil
		}
		return weir.APIKey{}, false, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCachedKeys {
		c.m = make(map[string]cachedKey)
	}
	c.m[string(ck)] = cachedKey{key: k, found: found, fetched: now}
	c.mu.Unlock()
	return k, found, nil
}
