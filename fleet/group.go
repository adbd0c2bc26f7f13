package fleet

import "sync"

// group is the goroutines of one owner — an Engine, a term's leader, a
// session's connection — which the owner's Close joins: once the group
// is closed it starts no more, and wait returns when those it started,
// and the calls it let in, have returned. An owner closes what its
// goroutines may block on (its connections, its context) before it
// waits, so that a goroutine blocked on a network read is unblocked
// first.
type group struct {
	mu     sync.Mutex
	wg     sync.WaitGroup
	closed bool
}

// spawn runs f on a goroutine of g's; false, and f does not run, once g
// is closed.
func (g *group) spawn(f func()) bool {
	if !g.enter() {
		return false
	}
	go func() {
		defer g.wg.Done()
		f()
	}()
	return true
}

// enter lets in a call running on a goroutine g did not start (a
// timer's callback, a session its listener accepted), which leave ends;
// false once g is closed, and the call must not run.
func (g *group) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	return true
}

// leave ends a call enter let in.
func (g *group) leave() { g.wg.Done() }

// close makes g start and let in nothing more.
func (g *group) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// wait waits for what g started and let in; call it after close.
func (g *group) wait() { g.wg.Wait() }
