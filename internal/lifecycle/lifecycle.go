// Package lifecycle is the one shape of Weir's long-lived parts: a
// Service starts and stops, and a List starts its services in order and
// stops them in reverse.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Service is a long-lived part of a process. Start brings it up and
// returns once it serves (ctx bounds the start, not the service's life);
// Stop brings it down, waits for every goroutine it started, and
// returns what could not be finished (a flush that failed). ctx bounds
// the stop: past it, Stop returns ctx's error and leaves the rest to
// the process's exit.
type Service interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// Funcs makes a Service of two funcs; a nil one does nothing.
type Funcs struct {
	OnStart func(ctx context.Context) error
	OnStop  func(ctx context.Context) error
}

// Start calls OnStart.
func (f Funcs) Start(ctx context.Context) error {
	if f.OnStart == nil {
		return nil
	}
	return f.OnStart(ctx)
}

// Stop calls OnStop.
func (f Funcs) Stop(ctx context.Context) error {
	if f.OnStop == nil {
		return nil
	}
	return f.OnStop(ctx)
}

// Closer is a Service that has nothing to start and stops with close.
func Closer(close func() error) Service {
	return Funcs{OnStop: func(context.Context) error { return close() }}
}

// List is services started in the order they were added and stopped in
// reverse. The zero List is empty and ready.
type List struct {
	mu      sync.Mutex
	items   []item
	started int // items[:started] have started
	stopped bool
}

type item struct {
	name string
	svc  Service
}

// Add appends svc, named for errors ("start tasks: …"); a nil svc is
// skipped, so that an optional part may be added as it is.
func (l *List) Add(name string, svc Service) {
	if svc == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items = append(l.items, item{name, svc})
}

// Start starts the services not started yet, in order. If one fails,
// Start returns its error at once; those that started are stopped by
// Stop, as after a success.
func (l *List) Start(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return errors.New("lifecycle: start after stop")
	}
	for ; l.started < len(l.items); l.started++ {
		it := l.items[l.started]
		if err := it.svc.Start(ctx); err != nil {
			return fmt.Errorf("start %s: %w", it.name, err)
		}
	}
	return nil
}

// Stop stops the services that started, in reverse order, each once,
// and joins their errors. Every service is stopped whatever the others
// returned; a second Stop does nothing.
func (l *List) Stop(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return nil
	}
	l.stopped = true
	var errs []error
	for i := l.started - 1; i >= 0; i-- {
		it := l.items[i]
		if err := it.svc.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", it.name, err))
		}
	}
	return errors.Join(errs...)
}

// Loop runs one function in a goroutine as a Service's body: Go starts
// it with a context that Stop cancels, and Stop waits for it to return.
// The zero Loop is ready.
type Loop struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Go runs run until Stop; a Loop runs once. What run returns on its
// own, before Stop, is Err's, and Done is closed.
func (l *Loop) Go(run func(ctx context.Context) error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done = cancel, make(chan struct{})
	go func() {
		err := run(ctx)
		if ctx.Err() != nil {
			err = nil // stopped, not failed
		}
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
		close(l.done)
	}()
}

// Done is closed once the function returned; nil before Go (a nil
// channel never fires, so a select on a part that never ran waits on
// the others).
func (l *Loop) Done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done
}

// Err is what the function returned on its own, once Done is closed;
// nil if it returned because Stop asked it to.
func (l *Loop) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Stop cancels the function's context and waits for it to return, or
// for ctx to end.
func (l *Loop) Stop(ctx context.Context) error {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if done == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
