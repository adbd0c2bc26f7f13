package usage

import (
	"sync"
	"time"

	"github.com/weir-gateway/weir/clock"
)

// timer is a channel told once each time it is armed and its time
// passes on the clock: the flusher re-arms it as it takes each turn.
type timer struct {
	mu sync.Mutex
	c  chan struct{} // cap 1; nil until armed: never ready
	t  clock.Timer
}

// arm tells the channel once d has passed on c.
func (t *timer) arm(c clock.Clock, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.c == nil {
		t.c = make(chan struct{}, 1)
	}
	ch := t.c
	t.t = c.AfterFunc(d, func() {
		select {
		case ch <- struct{}{}:
		default: // a turn is already due
		}
	})
}

// channel is the channel told, the same from the first call on.
func (t *timer) channel() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.c == nil {
		t.c = make(chan struct{}, 1)
	}
	return t.c
}

// stop stops the pending arming.
func (t *timer) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.t != nil {
		t.t.Stop()
	}
}
