package serve

import (
	"log/slog"
	"time"

	"github.com/weir-gateway/weir/clock"
)

// lockOptions say which store lockStorage locks and how long it waits for
// a lock another process holds.
type lockOptions struct {
	Path   string        // the database; its lock is Path+".lock"
	Wait   time.Duration // longest wait for the lock; default 5s
	Every  time.Duration // how often to try again; default 50ms
	Logger *slog.Logger  // says once that it waits; default none
	Clock  clock.Clock   // default clock.Real
}

func (o *lockOptions) defaults() {
	if o.Wait <= 0 {
		o.Wait = 5 * time.Second
	}
	if o.Every <= 0 {
		o.Every = 50 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.Real
	}
}
