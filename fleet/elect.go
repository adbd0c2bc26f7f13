package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-gateway/weir/clock"
)

// ElectorConfig configures an Elector. Its clock, logger, TTL and
// heartbeat timeout are the Coordinator's.
type ElectorConfig struct {
	// Poll is how often the term is re-read without a notification, the
	// safety net under LISTEN; each wait is drawn from [Poll/2, 3·Poll/2).
	// Default 5s.
	Poll time.Duration
	// Margin is taken off TermTTL for the local leadership deadline
	// (see Leading). Default TermTTL/5; less than TermTTL/2, so that a
	// renewal at TermTTL/3 comes before the deadline.
	Margin time.Duration
}

// Elector keeps this replica registered and alive, takes the leadership
// when no one holds it, keeps it while it can, and reports every new term.
type Elector struct {
	coord *Coordinator
	cfg   ElectorConfig
	clock clock.Clock
	log   *slog.Logger
	ttl   time.Duration

	changes chan Term     // coalesced: holds at most the newest term
	refresh chan struct{} // the listener's word: re-read the term
	// takeover carries the epoch of a term whose leader was proven dead
	// (TakeOver).
	takeover chan uint64
	started  atomic.Bool

	mu        sync.Mutex
	leadEpoch uint64    // 0: not leading
	leadUntil time.Time // the local deadline of leadEpoch

	// The term loop's own state, touched by its goroutine only.
	known    Term      // the newest term read or won
	knownAt  time.Time // local time the read of known was sent
	jitter   time.Duration
	sentAt   time.Time // when the last successful renew or campaign was sent
	wonEpoch uint64    // the last epoch this replica took, resigned on the way out
	// ownTried is the epoch of a term of this replica's id, not taken by
	// this process, that it campaigned for once at once (Campaign takes
	// it from an earlier registration of the id, a restarted process).
	ownTried  uint64
	retryAt   time.Time // no database call before this, after an error
	delivered Term
	sentOnce  bool
}

// NewElector returns an Elector for coord's replica.
func NewElector(coord *Coordinator, cfg ElectorConfig) (*Elector, error) {
	if coord == nil {
		return nil, errors.New("fleet: nil coordinator")
	}
	ttl := coord.cfg.TermTTL
	if cfg.Poll == 0 {
		cfg.Poll = 5 * time.Second
	}
	if cfg.Margin == 0 {
		cfg.Margin = ttl / 5
	}
	if cfg.Poll < minDuration {
		return nil, fmt.Errorf("fleet: poll interval %v is below the minimum %v", cfg.Poll, minDuration)
	}
	if cfg.Margin < 0 || cfg.Margin >= ttl/2 {
		return nil, fmt.Errorf("fleet: margin %v must be at least 0 and less than half the term TTL %v", cfg.Margin, ttl)
	}
	return &Elector{
		coord:    coord,
		cfg:      cfg,
		clock:    coord.cfg.Clock,
		log:      coord.cfg.Logger.With("replica", coord.cfg.Replica),
		ttl:      ttl,
		changes:  make(chan Term, 1),
		refresh:  make(chan struct{}, 1),
		takeover: make(chan uint64, 1),
	}, nil
}

// Changes delivers each new term as this replica learns it — a new epoch,
// or the end of one (Left 0: no one leads until the next campaign) — from
// its own campaigns, from failed renewals, from notifications and from
// polls. A slow reader gets the newest term, not each one. The channel is
// closed when Run returns.
//
// Changes says who leads as the database says. Whether this replica may
// act as the leader is Leading's to say: after a pause, this replica's own
// term may still show here while Leading already reports false.
func (e *Elector) Changes() <-chan Term { return e.changes }

// Leading reports the epoch this replica leads and true, or 0 and false.
// It holds the leadership only while the clock reads before (when the
// last successful renew or campaign was sent) + TermTTL − Margin, checked
// at the call: a process paused past its term learns on resume that it
// no longer leads, before it does anything. Act on an epoch only after
// Leading returned it, and pass it to every write (Fence, Forget).
func (e *Elector) Leading() (uint64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.leadEpoch == 0 || !e.clock.Now().Before(e.leadUntil) {
		return 0, false
	}
	return e.leadEpoch, true
}

func (e *Elector) setLead(epoch uint64, sent time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.leadEpoch = epoch
	e.leadUntil = sent.Add(e.ttl - e.cfg.Margin)
	e.sentAt = sent
}

// stepDown ends the local leadership and returns the epoch it had.
func (e *Elector) stepDown() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	epoch := e.leadEpoch
	e.leadEpoch, e.leadUntil = 0, time.Time{}
	return epoch
}

// Run registers this replica, then heartbeats every HeartbeatTimeout/3,
// campaigns whenever no valid term is known, and renews every TermTTL/3
// while it leads, until ctx ends; then it resigns a term it holds, so
// another replica takes over at once, and returns nil. It returns
// ErrFenced when this replica's registration is gone or superseded (the
// replica must stop), an error wrapping ErrNoListen when the store's
// announcements cannot reach this process (TermListen), and Register's
// error if registering fails. Run may be called once.
func (e *Elector) Run(ctx context.Context) error {
	if !e.started.CompareAndSwap(false, true) {
		return errors.New("fleet: Elector.Run called twice")
	}
	defer close(e.changes)
	if _, err := e.coord.Register(ctx); err != nil {
		return err
	}
	e.log.Info("fleet replica registered", "gen", e.coord.Gen())
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := e.heartbeats(runCtx); err != nil {
			cancel(err)
		}
	})
	wg.Go(func() {
		if err := e.listen(runCtx); err != nil {
			cancel(err)
		}
	})
	wg.Go(func() {
		// The life session ends with runCtx; it fails only for a
		// registration the store cannot hold, and then this replica
		// cannot be proven dead, only silent.
		if err := e.coord.HoldLife(runCtx); err != nil {
			e.log.Error("fleet life session not held", "err", err)
		}
	})
	e.termLoop(runCtx)
	wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return context.Cause(runCtx)
}

// listen asks the term loop to re-read the term on each announcement,
// and in full whenever the store's listener listens afresh, until ctx
// ends; it fails only when announcements cannot reach this process
// (ErrNoListen).
func (e *Elector) listen(ctx context.Context) error {
	err := e.coord.store.TermListen(ctx, func(uint64) { e.signalRefresh() })
	if err != nil && ctx.Err() == nil {
		e.log.Error("fleet listener", "err", err)
		return err
	}
	return nil
}

// heartbeats marks the replica alive every HeartbeatTimeout/3 until ctx
// ends or it is fenced.
func (e *Elector) heartbeats(ctx context.Context) error {
	timeout := e.coord.cfg.HeartbeatTimeout
	w := newWaker(e.clock)
	defer w.stop()
	for {
		w.arm(timeout / 3)
		select {
		case <-ctx.Done():
			return nil
		case <-w.c:
		}
		opCtx, cancel := context.WithTimeout(ctx, timeout)
		err := e.coord.Heartbeat(opCtx)
		cancel()
		switch {
		case errors.Is(err, ErrFenced):
			e.log.Error("fleet replica fenced; stopping", "err", err)
			return err
		case err != nil && ctx.Err() == nil:
			e.log.Warn("fleet heartbeat failed", "err", err)
		}
	}
}

// opTimeout bounds one database call of the term loop.
func (e *Elector) opTimeout() time.Duration { return max(e.ttl, time.Second) }

// retryDelay is the pause after a failed database call: a tenth of the
// TTL, jittered, so a renewal is tried again well before the deadline.
func (e *Elector) retryDelay() time.Duration {
	d := e.ttl / 10
	return d/2 + rand.N(d)
}

// termLoop campaigns, renews and reads the term until ctx ends, then
// resigns what it holds.
func (e *Elector) termLoop(ctx context.Context) {
	timer, poll := newWaker(e.clock), newWaker(e.clock)
	defer timer.stop()
	defer poll.stop()
	poll.arm(e.pollWait())
	needRead := true
	var early uint64 // a term whose leader was proven dead, to take over
	for ctx.Err() == nil {
		now := e.clock.Now()
		e.mu.Lock()
		leadEpoch, leadUntil := e.leadEpoch, e.leadUntil
		e.mu.Unlock()
		if leadEpoch != 0 && !now.Before(leadUntil) {
			// The deadline passed without a renewal: no longer leading,
			// whatever the database says. Find out what it says.
			e.stepDown()
			e.log.Warn("fleet leadership lapsed locally", "epoch", leadEpoch)
			leadEpoch, needRead = 0, true
		}
		if early != 0 {
			epoch := early
			early = 0
			if leadEpoch == 0 && !now.Before(e.retryAt) {
				e.campaignEarly(ctx, now, int64(epoch))
				continue
			}
		}
		if needRead && !now.Before(e.retryAt) {
			needRead = !e.read(ctx, now)
			continue
		}
		var due time.Time
		switch {
		case leadEpoch != 0:
			due = e.sentAt.Add(e.ttl / 3)
		case e.known.Leader == e.coord.Replica() && e.known.Left > 0 && e.known.Epoch != e.wonEpoch && e.known.Epoch != e.ownTried:
			// The term of this replica's id before a restart: take it
			// now rather than wait out the dead process's term; once,
			// in case the term is this process's own after all.
			e.ownTried = e.known.Epoch
			due = now
		default:
			due = e.knownAt.Add(e.known.Left + e.jitter)
		}
		if due.Before(e.retryAt) {
			due = e.retryAt
		}
		if !now.Before(due) {
			if leadEpoch != 0 {
				needRead = e.renew(ctx, leadEpoch, now) || needRead
			} else {
				e.campaign(ctx, now)
			}
			continue
		}
		wait := due.Sub(now)
		if leadEpoch != 0 {
			wait = min(wait, leadUntil.Sub(now))
		}
		timer.arm(wait)
		select {
		case <-ctx.Done():
		case <-timer.c:
		case <-e.refresh:
			needRead = true
		case early = <-e.takeover:
		case <-poll.c:
			needRead = true
			poll.arm(e.pollWait())
		}
	}
	// Leave first, so that the next leader does not wait for this
	// replica to sync with it.
	lctx, lcancel := context.WithTimeout(context.WithoutCancel(ctx), e.opTimeout())
	if err := e.coord.Leave(lctx); err != nil {
		e.log.Warn("fleet leave failed; the registration lapses by itself", "err", err)
	}
	lcancel()
	// Resign the last term taken even if the local deadline already ended
	// it here: in the database it may still run. Resign touches only a
	// term that is still this replica's epoch.
	e.stepDown()
	if epoch := e.wonEpoch; epoch != 0 {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opTimeout())
		defer cancel()
		if err := e.coord.Resign(rctx, epoch); err != nil {
			e.log.Warn("fleet resign failed; the term runs out by itself", "epoch", epoch, "err", err)
		} else {
			e.log.Info("fleet leadership given up", "epoch", epoch)
		}
	}
}

func (e *Elector) pollWait() time.Duration {
	return e.cfg.Poll/2 + rand.N(e.cfg.Poll)
}

// read re-reads the term in full and reports whether it could.
func (e *Elector) read(ctx context.Context, sent time.Time) bool {
	opCtx, cancel := context.WithTimeout(ctx, e.opTimeout())
	defer cancel()
	t, err := e.coord.Current(opCtx)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("fleet term read failed", "err", err)
			e.retryAt = sent.Add(e.retryDelay())
		}
		return false
	}
	e.observe(t, sent)
	return true
}

// TakeOver asks the elector to take the term of epoch at once, before
// it expires, if PostgreSQL no longer holds its leader's life session
// (Coordinator.TakeOver). Call it only for a leader whose process has
// other proof of death: its fleet listener refuses connections.
func (e *Elector) TakeOver(epoch uint64) {
	select {
	case e.takeover <- epoch:
	default:
		// One is pending: the newest epoch wins.
		select {
		case <-e.takeover:
		default:
		}
		select {
		case e.takeover <- epoch:
		default:
		}
	}
}

// campaign takes the term if it has expired.
func (e *Elector) campaign(ctx context.Context, sent time.Time) {
	e.campaignEarly(ctx, sent, -1)
}

// campaignEarly takes the term if it has expired, or if it is early's
// and its leader's life session is gone (-1: none).
func (e *Elector) campaignEarly(ctx context.Context, sent time.Time, early int64) {
	opCtx, cancel := context.WithTimeout(ctx, e.opTimeout())
	defer cancel()
	var t Term
	var won bool
	var err error
	if early >= 0 {
		t, won, err = e.coord.TakeOver(opCtx, uint64(early))
	} else {
		t, won, err = e.coord.Campaign(opCtx)
	}
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("fleet campaign failed", "err", err)
			e.retryAt = sent.Add(e.retryDelay())
		}
		return
	}
	if won {
		e.wonEpoch = t.Epoch
		e.setLead(t.Epoch, sent)
		if early >= 0 && uint64(early) == t.Epoch-1 {
			e.log.Warn("fleet leadership taken from a leader whose process died", "epoch", t.Epoch)
		} else {
			e.log.Info("fleet leadership taken", "epoch", t.Epoch)
		}
	} else if t.Left <= 0 {
		// Lost to a term that has already ended: not expected, since a
		// lost campaign saw an unexpired term; do not spin on it.
		e.retryAt = sent.Add(e.retryDelay())
	}
	e.observe(t, sent)
}

// renew extends the term this replica leads. It reports whether the term
// must be read again: the renewal was refused, so someone else may lead.
func (e *Elector) renew(ctx context.Context, epoch uint64, sent time.Time) (reread bool) {
	opCtx, cancel := context.WithTimeout(ctx, e.opTimeout())
	defer cancel()
	ok, err := e.coord.Renew(opCtx, epoch)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			// Still leading until the deadline; try again soon.
			e.log.Warn("fleet renew failed", "epoch", epoch, "err", err)
			e.retryAt = sent.Add(e.retryDelay())
		}
	case ok:
		e.mu.Lock()
		if e.leadEpoch == epoch {
			e.leadUntil = sent.Add(e.ttl - e.cfg.Margin)
			e.sentAt = sent
		}
		e.mu.Unlock()
	default:
		e.stepDown()
		e.log.Warn("fleet leadership lost: deposed", "epoch", epoch)
		return true
	}
	return false
}

// observe takes in a term read or won at local time sent, steps down when
// it shows this replica's epoch over, and delivers it when it is new.
func (e *Elector) observe(t Term, sent time.Time) {
	if t.Epoch < e.known.Epoch {
		return // an older read than one already seen
	}
	e.known, e.knownAt = t, sent
	// A term still running: campaign a little after its expiry, each
	// replica at its own moment, so that not all of them wake at once. An
	// ended term: campaign now (the row lock lines campaigners up).
	e.jitter = 0
	if t.Left > 0 {
		e.jitter = rand.N(e.ttl/20 + 1)
	}
	e.mu.Lock()
	mine := e.leadEpoch
	e.mu.Unlock()
	if mine != 0 && (t.Epoch != mine || t.Left <= 0) {
		e.stepDown()
		e.log.Warn("fleet leadership lost", "epoch", mine, "now", t.Epoch)
	}
	e.deliver(t)
}

// deliver hands t to Changes if it differs from the last one delivered
// (another epoch, leader or address, or the term's end), replacing an
// undelivered older term.
func (e *Elector) deliver(t Term) {
	d := e.delivered
	if e.sentOnce && d.Epoch == t.Epoch && d.Leader == t.Leader && d.Addr == t.Addr && (d.Left <= 0) == (t.Left <= 0) {
		return
	}
	e.delivered, e.sentOnce = t, true
	e.log.Info("fleet term", "epoch", t.Epoch, "leader", t.Leader, "addr", t.Addr, "ended", t.Left <= 0)
	select {
	case e.changes <- t:
	default:
		// The reader has not taken the previous term: replace it. Only
		// this goroutine sends, so the send after the drain cannot block.
		select {
		case <-e.changes:
		default:
		}
		e.changes <- t
	}
}

// signalRefresh asks the term loop to re-read the term.
func (e *Elector) signalRefresh() {
	select {
	case e.refresh <- struct{}{}:
	default:
	}
}

// waker signals c once, after a duration on the injected clock; arming it
// again replaces the pending signal. A signal from a timer that fired just
// before it was replaced may still be in c: receivers treat a signal as
// "check again", never as proof that the time has come.
type waker struct {
	clock clock.Clock
	c     chan struct{}
	t     clock.Timer
}

func newWaker(c clock.Clock) *waker { return &waker{clock: c, c: make(chan struct{}, 1)} }

func (w *waker) arm(d time.Duration) {
	w.stop()
	w.t = w.clock.AfterFunc(d, func() {
		select {
		case w.c <- struct{}{}:
		default:
		}
	})
}

func (w *waker) stop() {
	if w.t != nil {
		w.t.Stop()
		w.t = nil
	}
}
