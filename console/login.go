package console

import (
	"sync"
	"time"

	"github.com/weir-gateway/weir/clock"
)

// loginGuard slows the guessing of the admin token at the login form
// without letting anyone lock out the right token: the token is checked
// first, in constant time, and the right one is let in whatever failed
// before and from wherever. Only failures are limited, by when their
// answer goes out:
//
//   - from one address, the first freeFailures are answered at once; each
//     one after waits failureBackoff, doubling up to maxFailureWait, and
//     an address's failed answers go out one after another, so that
//     parallel connections guess no faster than one;
//   - past globalFailures a minute from every address together, failed
//     answers go out one after another, a minute / globalFailures apart:
//     many addresses slow every failure down, never a right token;
//   - no answer waits longer than maxFailureWait, and at most
//     maxHeldFailures are held at once (a goroutine and a connection
//     each): past it a failure is answered at once.
//
// It slows a guesser; it is no stand-in for a long random token (a
// client holding that many connections gets its answers faster).
type loginGuard struct {
	mu    sync.Mutex
	clock clock.Clock

	byAddr map[string]*addrFailures
	// minute starts the current minute's window; inMinute counts the
	// failures from every address in it.
	minute   time.Time
	inMinute int
	// next is when the next failure past globalFailures may be answered.
	next time.Time
	held int
	// onHold, if set (tests), is called as a held failure starts waiting.
	onHold func()
}

// addrFailures are one address's recent failures.
type addrFailures struct {
	n    int       // failures since its last success, each within forgetFailures of the one before
	last time.Time // the last one
	next time.Time // when its next failed answer may go out
}

const (
	freeFailures    = 5
	failureBackoff  = time.Second
	maxFailureWait  = 30 * time.Second
	forgetFailures  = 15 * time.Minute
	globalFailures  = 100
	maxHeldFailures = 1024
	// maxGuardAddrs bounds the addresses remembered; past it the one
	// whose last failure is oldest is forgotten.
	maxGuardAddrs = 10_000
)

func newLoginGuard(c clock.Clock) *loginGuard {
	return &loginGuard{clock: c, byAddr: make(map[string]*addrFailures)}
}

// failed records a failure from addr and says when its answer may go
// out, and how many failures addr has now. held is false when too many
// failures are already held: answer at once (and do not call release).
func (g *loginGuard) failed(addr string) (at time.Time, n int, held bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clock.Now()
	f := g.byAddr[addr]
	if f == nil || now.Sub(f.last) >= forgetFailures {
		if f == nil && len(g.byAddr) >= maxGuardAddrs {
			g.forgetOldestLocked(now)
		}
		f = &addrFailures{}
		g.byAddr[addr] = f
	}
	f.n++
	f.last = now
	if now.Sub(g.minute) >= time.Minute {
		g.minute, g.inMinute = now, 0
	}
	g.inMinute++

	at = now
	if f.n > freeFailures {
		at = now.Add(min(failureBackoff<<min(f.n-freeFailures-1, 16), maxFailureWait))
	}
	at = later(at, f.next)
	if g.inMinute > globalFailures {
		at = later(at, g.next)
		g.next = at.Add(time.Minute / globalFailures)
	}
	at = earlier(at, now.Add(maxFailureWait))
	f.next = at
	if !at.After(now) {
		return now, f.n, false
	}
	if g.held >= maxHeldFailures {
		return now, f.n, false
	}
	g.held++
	return at, f.n, true
}

// release says a held failure has been answered.
func (g *loginGuard) release() {
	g.mu.Lock()
	g.held--
	g.mu.Unlock()
}

// succeeded forgets addr's failures.
func (g *loginGuard) succeeded(addr string) {
	g.mu.Lock()
	delete(g.byAddr, addr)
	g.mu.Unlock()
}

// forgetOldestLocked drops the addresses whose failures are forgotten
// anyway, or else the one whose last failure is oldest.
func (g *loginGuard) forgetOldestLocked(now time.Time) {
	var oldest string
	var at time.Time
	for a, f := range g.byAddr {
		if now.Sub(f.last) >= forgetFailures {
			delete(g.byAddr, a)
			continue
		}
		if oldest == "" || f.last.Before(at) {
			oldest, at = a, f.last
		}
	}
	if len(g.byAddr) >= maxGuardAddrs {
		delete(g.byAddr, oldest)
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
