package riverjob

import (
	"container/heap"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"

	"github.com/weir-gateway/weir/clock"
)

// insertTopic and insertPayload are River's notification that jobs were
// inserted in a queue (its notifier's NotificationTopicInsert and the
// payload its client sends), which makes the queue's producers fetch.
const insertTopic = "river_insert"

func insertPayload(queue string) string { return fmt.Sprintf(`{"queue": %q}`, queue) }

// wakeTimeout bounds one wake's notification on a database.
const wakeTimeout = 10 * time.Second

// Waker wakes River's producers of a queue, on every River client on its
// driver's database, by sending River's insert notification through the
// driver: in the process on a driver from InProcess, with NOTIFY on
// PostgreSQL. It is for the jobs River would otherwise find only by a
// fetch poll: a job snoozed, or retried, for less than River's scheduler
// interval is made available at once with its time in the future, and no
// notification comes when that time does. WakeAt wakes the queue then.
// A nil Waker wakes nothing.
type Waker struct {
	exec   riverdriver.Executor
	clock  clock.Clock
	logger *slog.Logger

	mu      sync.Mutex
	due     dueHeap
	timer   clock.Timer
	timerAt time.Time
	// armed counts the timers set: a timer that fires after another
	// replaced it does nothing.
	armed   uint64
	stopped bool
}

// NewWaker returns a Waker on d, whose WakeAt keeps time on c (River's
// schedule is on the wall clock: clock.Real outside tests) and whose
// failed notifications logger hears; nil: none.
func NewWaker[TTx any](d riverdriver.Driver[TTx], c clock.Clock, logger *slog.Logger) *Waker {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Waker{exec: d.GetExecutor(), clock: c, logger: logger}
}

// WakesInProcess reports whether d wakes its producers in the process
// (it is from InProcess), where a wake costs nothing.
func WakesInProcess[TTx any](d riverdriver.Driver[TTx]) bool {
	w, ok := any(d).(Waking)
	return ok && w.WakesInProcess()
}

// Wake wakes the producers of queues at once.
func (w *Waker) Wake(ctx context.Context, queues ...string) error {
	if w == nil || len(queues) == 0 {
		return nil
	}
	payloads := make([]string, 0, len(queues))
	for _, q := range queues {
		payloads = append(payloads, insertPayload(q))
	}
	return w.exec.NotifyMany(ctx, &riverdriver.NotifyManyParams{Topic: insertTopic, Payload: payloads})
}

// WakeAt wakes the producers of queue at the time at, or at once if it
// has passed; nothing after Stop.
func (w *Waker) WakeAt(queue string, at time.Time) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	heap.Push(&w.due, wake{at: at, queue: queue})
	w.armLocked()
}

// eventBuffer is the room for River's job events that Follow keeps: a
// burst beyond it loses its wakes (the fetch poll finds those jobs).
const eventBuffer = 10_000

// Follow wakes, for each job of client's that River snoozes or retries
// for later, the job's queue when the job is due: it hears of the job
// from River's events, which come once River has recorded the job's new
// state and time, so the wake never comes before the job is available.
// It runs until stop is called, which returns once it has stopped; call
// it while client runs jobs.
func Follow[TTx any](client *river.Client[TTx], w *Waker) (stop func()) {
	if w == nil {
		return func() {}
	}
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: eventBuffer,
		Kinds:    []river.EventKind{river.EventKindJobSnoozed, river.EventKindJobFailed},
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range events {
			if j := ev.Job; j != nil && (j.State == rivertype.JobStateAvailable || j.State == rivertype.JobStateScheduled || j.State == rivertype.JobStateRetryable) {
				w.WakeAt(j.Queue, j.ScheduledAt)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel() // closes events
			<-done
		})
	}
}

// Stop drops the wakes to come.
func (w *Waker) Stop() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	w.due = nil
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
}

// Pending is how many wakes are to come.
func (w *Waker) Pending() int {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.due)
}

// armLocked sets the timer for the earliest wake, unless it is set for
// that time already.
func (w *Waker) armLocked() {
	if len(w.due) == 0 {
		return
	}
	next := w.due[0].at
	if w.timer != nil {
		if !next.Before(w.timerAt) {
			return
		}
		w.timer.Stop()
	}
	w.timerAt = next
	w.armed++
	armed := w.armed
	w.timer = w.clock.AfterFunc(max(next.Sub(w.clock.Now()), 0), func() { w.fire(armed) })
}

// fire wakes the queues whose time has come, once each, and sets the
// timer for the next.
func (w *Waker) fire(armed uint64) {
	w.mu.Lock()
	if w.stopped || armed != w.armed {
		w.mu.Unlock()
		return
	}
	now := w.clock.Now()
	var queues []string
	for len(w.due) > 0 && !w.due[0].at.After(now) {
		q := heap.Pop(&w.due).(wake).queue
		if !slices.Contains(queues, q) {
			queues = append(queues, q)
		}
	}
	w.timer = nil
	w.armLocked()
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), wakeTimeout)
	defer cancel()
	if err := w.Wake(ctx, queues...); err != nil {
		w.logger.Warn("riverjob: a queue's wake was not sent; its fetch poll finds its jobs", "queues", queues, "error", err)
	}
}

type wake struct {
	at    time.Time
	queue string
}

// dueHeap orders wakes by time, the earliest first.
type dueHeap []wake

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(wake)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
