package console

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/weir-gateway/weir/clock"
)

// keyNames finds keys' names by id for the views that show keys (queues,
// tasks, scopes), which hold only ids. It keeps the store's list of keys
// and reads it again when it is older than namesTTL, or when an id asked
// for is not in it, but never more often than namesMinAge: a view asking
// about a key the store does not have costs one list per namesMinAge.
type keyNames struct {
	keys   KeyStore
	clock  clock.Clock
	logger *slog.Logger

	mu   sync.Mutex
	byID map[string]string
	at   time.Time
}

const (
	namesTTL    = 30 * time.Second
	namesMinAge = 5 * time.Second
	namesWait   = 2 * time.Second
)

// of returns the names of ids, by id; an id with no key, or a key
// without a name, is left out.
func (n *keyNames) of(ctx context.Context, ids []string) map[string]string {
	if len(ids) == 0 || n.keys == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.clock.Now()
	fresh := n.byID != nil && now.Sub(n.at) < namesTTL
	for _, id := range ids {
		if _, ok := n.byID[id]; !ok {
			fresh = false
			break
		}
	}
	if !fresh && (n.at.IsZero() || now.Sub(n.at) >= namesMinAge) {
		n.at = now
		// A store that does not answer must not hold up the sampler: the
		// names are a nicety. A deadline on the store is on the real
		// clock, whatever n.clock is.
		lctx, cancel := context.WithTimeout(ctx, namesWait)
		ks, err := n.keys.KeyList(lctx)
		cancel()
		if err != nil {
			n.logger.Warn("console: could not list keys for their names", "error", err)
		} else {
			n.byID = make(map[string]string, len(ks))
			for _, k := range ks {
				n.byID[k.ID] = k.Name
			}
		}
	}
	out := make(map[string]string)
	for _, id := range ids {
		if name := n.byID[id]; name != "" {
			out[id] = name
		}
	}
	return out
}
