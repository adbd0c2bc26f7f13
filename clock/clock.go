// Package clock is the time source Weir's logic is written against. Nothing
// below cmd/ calls time.Now or sleeps directly: services take a Clock, the
// binary passes Real, and tests pass a Fake that moves only when told to.
package clock

import "time"

// Clock tells the time and runs functions later.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine (Real) or inside Advance (Fake)
	// once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not started; it reports whether it did.
	Stop() bool
}

// Real is the wall clock.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// After is time.After on c: a channel closed once d has passed, and the
// timer that closes it, to stop it early.
func After(c Clock, d time.Duration) (<-chan struct{}, Timer) {
	ch := make(chan struct{})
	return ch, c.AfterFunc(d, func() { close(ch) })
}
