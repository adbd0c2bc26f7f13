package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/weir-gateway/weir"
)

// Cache affinity. A provider's (or a runtime's) prompt cache holds the
// prefixes it saw last: a request that shares one with an earlier request
// is cheaper and faster where that request went. For a model with
// affinity on, the service remembers, per model and per affinity key (a
// prompt_cache_key, a user, or a first message), which candidate served
// last, and puts that candidate first in the next request's order. It
// only orders candidates: the engine still admits the first that fits in
// global order, so affinity never jumps a queue nor breaks a fairness
// rule. A strict model waits for that candidate alone, for up to its
// AffinityWait, before any may serve.

// In a fleet every replica keeps its own table, and shares what it
// records with the others (Deps.Affinity: the fleet's sessions, through
// the leader), so that a client whose requests a balancer spreads over
// the replicas still reaches the candidate that served its prefix. A
// lookup stays in the process; an entry is shared when its target
// changes, or once it is older than affinityReshare, so that a key that
// stays on one candidate costs the fleet a frame every few minutes, not
// one a request.

// AffinityShare carries affinity entries between a fleet's replicas
// (fleet.Engine, through the leader).
type AffinityShare interface {
	// ShareAffinity tells the other replicas that target served key
	// last. It must not block; what cannot be sent is dropped.
	ShareAffinity(key, target string)
	// OnAffinity sets f to receive what the other replicas share.
	OnAffinity(f func(key, target string))
}

// The affinity table's bounds: how long it remembers (about as long as
// providers keep a prompt cache), and how many keys; and how old an
// entry is shared again although its target is the same.
const (
	affinityTTL     = 5 * time.Minute
	affinityMaxKeys = 100_000
	affinityReshare = affinityTTL / 2
	// defaultAffinityWait bounds a strict affinity's wait when the model
	// does not.
	defaultAffinityWait = 2 * time.Second
)

// The results of one request's affinity, as metric labels: served where
// the table said (hit), elsewhere (miss), or with nothing remembered
// (new).
const (
	affinityHit  = "hit"
	affinityMiss = "miss"
	affinityNew  = "new"
)

type affinityEntry struct {
	target string
	at     time.Time
	// shared is when the entry was last shared with the fleet, or
	// learned from it.
	shared time.Time
}

// affinityTable remembers the candidate that served each affinity key
// last, bounded in size and age.
type affinityTable struct {
	mu sync.Mutex
	m  map[string]affinityEntry
}

// get is the target that served key last, if within affinityTTL of now.
func (a *affinityTable) get(key string, now time.Time) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.m[key]
	if !ok || now.Sub(e.at) >= affinityTTL {
		return "", false
	}
	return e.target, true
}

// put remembers that target served key at now, and reports whether to
// share that with the fleet: a new target, or one last shared longer
// than affinityReshare ago. learned is an entry another replica shared,
// which is not shared again before affinityReshare.
func (a *affinityTable) put(key, target string, now time.Time, learned bool) (share bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.makeRoomLocked(key, now)
	old, ok := a.m[key]
	share = !learned && (!ok || old.target != target || now.Sub(old.shared) >= affinityReshare)
	e := affinityEntry{target: target, at: now, shared: old.shared}
	if share || learned {
		e.shared = now
	}
	a.m[key] = e
	return share
}

// makeRoomLocked makes room for key: a full table first forgets what is
// past affinityTTL, then, if that is not enough, half of what is left
// (map order: arbitrary keys), so that it stays bounded however many
// keys clients make up.
func (a *affinityTable) makeRoomLocked(key string, now time.Time) {
	if a.m == nil {
		a.m = make(map[string]affinityEntry)
	}
	if _, ok := a.m[key]; !ok && len(a.m) >= affinityMaxKeys {
		for k, e := range a.m {
			if now.Sub(e.at) >= affinityTTL {
				delete(a.m, k)
			}
		}
		for k := range a.m {
			if len(a.m) < affinityMaxKeys/2 {
				break
			}
			delete(a.m, k)
		}
	}
}

// affinityKeyOf is c's key in the table; "" when its model's affinity is
// off or c shares nothing.
func affinityKeyOf(c *Call) string {
	if !c.Model.Affinity.On() || c.Affinity == "" {
		return ""
	}
	return c.Model.Name + "\x00" + c.Affinity
}

// taskAffinityKey is t's key in the table: what its input shares with
// other tasks of its model (a prompt_cache_key, a user, or the same
// prompt); "" when its model's affinity is off, t runs in another mode
// than production, or its input shares nothing.
func taskAffinityKey(m weir.Model, t weir.Task) string {
	if !m.Affinity.On() || t.RunMode != "" {
		return ""
	}
	var in struct {
		PromptCacheKey string `json:"prompt_cache_key"`
		User           string `json:"user"`
		Prompt         string `json:"prompt"`
	}
	if json.Unmarshal(t.Input, &in) != nil {
		return ""
	}
	var a string
	switch {
	case in.PromptCacheKey != "":
		a = "k:" + in.PromptCacheKey
	case in.User != "":
		a = "u:" + in.User
	case in.Prompt != "":
		sum := sha256.Sum256([]byte(in.Prompt))
		a = "p:" + hex.EncodeToString(sum[:16])
	default:
		return ""
	}
	return m.Name + "\x00" + a
}

// TaskStarted implements task.Starter: the platform model a task started
// on is where its model's next tasks that share its affinity key go
// first. A task's affinity only orders its candidates, as a request's
// prefer does; a strict affinity does not make a task wait.
func (s *Service) TaskStarted(t weir.Task) {
	st := s.state.Load()
	if st == nil {
		return
	}
	model, ok := st.models[t.Model]
	if !ok {
		return
	}
	if key := taskAffinityKey(model, t); key != "" && t.PlatformModel != "" {
		if s.affinity.put(key, t.PlatformModel, s.deps.Clock.Now(), false) && s.deps.Affinity != nil {
			s.deps.Affinity.ShareAffinity(key, t.PlatformModel)
		}
	}
}

// preferFirst is pms with prefer moved first, the others in their order;
// pms as they are if prefer is not among them.
func preferFirst(pms []string, prefer string) []string {
	i := slices.Index(pms, prefer)
	if i <= 0 {
		return pms
	}
	out := make([]string, 0, len(pms))
	out = append(out, prefer)
	out = append(out, pms[:i]...)
	return append(out, pms[i+1:]...)
}

// affinityWait is how long a strict affinity waits for its candidate.
func affinityWait(m weir.Model) time.Duration {
	if m.AffinityWait > 0 {
		return m.AffinityWait
	}
	return defaultAffinityWait
}
