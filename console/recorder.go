package console

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// Recorder counts what the console charts, on the request path: every
// admission's wait by model, the engine's failures by outcome and each
// key's usage. Each observation is a map lookup and a few atomic adds, no
// lock and no allocation once a model or key has been seen; the sampler
// (Console) takes the counts once a second.
type Recorder struct {
	models sync.Map // model name → *modelAcc
	nModel atomic.Int32
	keys   sync.Map // key id → *keyAcc
	nKey   atomic.Int32

	// failed counts waiters that left without a lease, by outcome.
	failed [outcomeSlots]atomic.Uint64
}

// outcomeSlots is one past the largest admission.Outcome.
const outcomeSlots = 16

// The bounds on what a Recorder tracks, so that a stream of new names
// cannot grow it without end: models come from the catalog and keys from
// the store, so these are far above what a gateway has.
const (
	maxModels = 256
	maxKeys   = 100_000
)

// queuedAfter is the wait past which an admission counts as one that
// queued (instead of being admitted at once).
const queuedAfter = time.Millisecond

// Waits are counted in bins whose bounds grow by √2 from 1 ms: bin 0 is
// "under 1 ms", bin i ≥ 1 is up to 2^(i/2) ms, the last bin is
// everything longer (about 17 minutes and up).
const waitBins = 42

func waitBin(d time.Duration) int {
	ms := float64(d) / float64(time.Millisecond)
	if ms < 1 {
		return 0
	}
	i := int(math.Ceil(2*math.Log2(ms))) + 1
	return min(max(i, 1), waitBins-1)
}

// binUpper is bin i's upper bound, in milliseconds.
func binUpper(i int) float64 {
	if i == 0 {
		return 1
	}
	return math.Pow(2, float64(i-1)/2)
}

type modelAcc struct {
	admitted atomic.Uint64
	queued   atomic.Uint64
	bins     [waitBins]atomic.Uint32
}

type keyAcc struct {
	requests, failed, tokens atomic.Uint64
	last                     atomic.Int64 // unix ns
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{} }

// ObserveQueueWait records an admitted request of model that waited d
// (gateway.Metrics's method of that name).
func (r *Recorder) ObserveQueueWait(model string, d time.Duration) {
	a := r.model(model)
	if a == nil {
		return
	}
	a.admitted.Add(1)
	if d >= queuedAfter {
		a.queued.Add(1)
	}
	a.bins[waitBin(d)].Add(1)
}

func (r *Recorder) model(name string) *modelAcc {
	if v, ok := r.models.Load(name); ok {
		return v.(*modelAcc)
	}
	if r.nModel.Load() >= maxModels {
		return nil
	}
	v, loaded := r.models.LoadOrStore(name, &modelAcc{})
	if !loaded {
		r.nModel.Add(1)
	}
	return v.(*modelAcc)
}

// Observe implements admission.Observer: it counts the waiters that
// left without a lease. It runs under the engine's lock, so it only adds.
func (r *Recorder) Observe(e admission.Event) {
	switch e.Outcome {
	case admission.OutcomeQueueFull, admission.OutcomeTimeout, admission.OutcomeCancelled,
		admission.OutcomeNoCandidate, admission.OutcomeRateLimited, admission.OutcomeFenced, admission.OutcomeBudgetExceeded:
		if e.WaiterID != "" && int(e.Outcome) < outcomeSlots {
			r.failed[e.Outcome].Add(1)
		}
	}
}

// Usage records one request's usage record against its key.
func (r *Recorder) Usage(u weir.Usage) {
	if u.KeyID == "" {
		return
	}
	var a *keyAcc
	if v, ok := r.keys.Load(u.KeyID); ok {
		a = v.(*keyAcc)
	} else {
		if r.nKey.Load() >= maxKeys {
			return
		}
		v, loaded := r.keys.LoadOrStore(u.KeyID, &keyAcc{})
		if !loaded {
			r.nKey.Add(1)
		}
		a = v.(*keyAcc)
	}
	a.requests.Add(1)
	if u.Status >= 400 {
		a.failed.Add(1)
	}
	a.tokens.Add(uint64(max(u.PromptTokens, 0) + max(u.CompletionTokens, 0)))
	a.last.Store(u.At.UnixNano())
}

// KeyUsage is one key's usage since the process started.
type KeyUsage struct {
	Requests uint64    `json:"requests"`
	Failed   uint64    `json:"failed"`
	Tokens   uint64    `json:"tokens"`
	Last     time.Time `json:"last,omitzero"`
}

// KeyUsage is key id's usage since the process started.
func (r *Recorder) KeyUsage(id string) KeyUsage {
	v, ok := r.keys.Load(id)
	if !ok {
		return KeyUsage{}
	}
	a := v.(*keyAcc)
	u := KeyUsage{Requests: a.requests.Load(), Failed: a.failed.Load(), Tokens: a.tokens.Load()}
	if ns := a.last.Load(); ns != 0 {
		u.Last = time.Unix(0, ns).UTC()
	}
	return u
}

// secondCounts is what a model's accumulator held over one second.
type secondCounts struct {
	admitted, queued uint64
	bins             *[waitBins]uint32 // nil: no admission
}

// take empties every model's accumulator into out.
func (r *Recorder) take(out map[string]secondCounts) {
	r.models.Range(func(k, v any) bool {
		a := v.(*modelAcc)
		c := secondCounts{admitted: a.admitted.Swap(0), queued: a.queued.Swap(0)}
		if c.admitted > 0 {
			c.bins = new([waitBins]uint32)
			for i := range a.bins {
				c.bins[i] = a.bins[i].Swap(0)
			}
		}
		out[k.(string)] = c
		return true
	})
}

// failures is the running count of waiters that left without a lease,
// by outcome name.
func (r *Recorder) failures() map[string]uint64 {
	out := make(map[string]uint64)
	for o := range r.failed {
		if n := r.failed[o].Load(); n > 0 {
			out[admission.Outcome(o).String()] = n
		}
	}
	return out
}

// quantile is the upper bound (ms) of the bin holding quantile q of the
// waits counted in bins; 0 if there are none.
func quantile(bins *[waitBins]uint64, q float64) float64 {
	var total uint64
	for _, n := range bins {
		total += n
	}
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, n := range bins {
		seen += n
		if seen >= rank {
			if i == 0 {
				return 0
			}
			return binUpper(i)
		}
	}
	return binUpper(waitBins - 1)
}
