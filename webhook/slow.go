package webhook

import (
	"strings"
	"sync"
	"time"
)

// maxSlowReceivers bounds the memory of slow receivers; past it, an
// arbitrary one is forgotten for each one added.
const maxSlowReceivers = 10_000

// receiver is a host as one tenant sends to it: slowness is remembered
// per tenant, so that a tenant whose path on a shared host hangs does not
// shorten another tenant's attempts to that host.
type receiver struct{ tenant, host string }

// slowReceivers remembers the receivers whose last attempt ran out of
// time. An attempt to one of them runs under the short timeout, except
// one at a time (the probe), which gets the full timeout so that a
// receiver that is slow but works is still delivered to. Any answer
// forgets the receiver; another timeout keeps it.
type slowReceivers struct {
	mu sync.Mutex
	m  map[receiver]*slowReceiver
}

type slowReceiver struct{ probing bool }

// begin returns the timeout of an attempt to r, full or short, and
// whether the attempt is r's probe, which end must be told.
func (sr *slowReceivers) begin(r receiver, full, short time.Duration) (time.Duration, bool) {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	st := sr.m[r]
	switch {
	case st == nil:
		return full, false
	case !st.probing:
		st.probing = true
		return full, true
	default:
		return short, false
	}
}

// end records how an attempt to r went: answered (any HTTP status) or
// timed out (neither: a connection error, the caller's cancellation,
// which say nothing of the receiver's speed).
func (sr *slowReceivers) end(r receiver, probe, answered, timedOut bool) {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	st := sr.m[r]
	switch {
	case answered:
		delete(sr.m, r)
		return
	case timedOut && st == nil:
		if sr.m == nil {
			sr.m = make(map[receiver]*slowReceiver)
		}
		if len(sr.m) >= maxSlowReceivers {
			for k := range sr.m {
				delete(sr.m, k)
				break
			}
		}
		sr.m[r] = &slowReceiver{}
		return
	}
	if probe && st != nil {
		st.probing = false
	}
}

// receiverOf is the receiver of a message to host (host[:port]).
func receiverOf(tenant, host string) receiver {
	return receiver{tenant: tenant, host: strings.ToLower(host)}
}
