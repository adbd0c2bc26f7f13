package gateway

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// Budgets of every end user apart ("user:*", docs/budgets.md): each end
// user a request names gets, of each such budget, a budget of its own
// (weir.Budget.ForEndUser) and so a scope of its own, made on the end
// user's first request as any budget's scope is set on its window's
// first request, and exact as they are: the engine reserves and settles
// in it, a fleet's leader's engine for every replica.
//
// Clients name end users, so the scopes are bounded: at most
// Config.MaxEndUserBudgets on this process. Past it, the end user least
// recently seen whose scopes hold no request of this process and have
// been idle endUserIdle (its last request's usage record is in the store
// by then, so its window's spend is read again whole when it comes
// back) is retired: its scopes go, and its alerts' state. If none is
// idle enough, a request of a new end user is refused, 503 with a
// Retry-After, rather than let through past its budget: an end user
// already known is never refused for it.

// endUserIdle is how long an end user's scopes must have held no
// request before they may be retired: longer than the usage recorder
// takes to write a request's record (server.usage_flush_interval, 1s by
// default), so that what a retired end user spent is in the store.
const endUserIdle = time.Minute

// endUserScan is how many of the least recently seen end users a new one
// looks through for one to retire.
const endUserScan = 64

// endUserScopes are the end users whose scopes are set, least recently
// seen at the back, and those being retired.
type endUserScopes struct {
	mu       sync.Mutex
	lru      *list.List // of *endUserScope; Front: most recently seen
	byID     map[string]*list.Element
	retiring map[string]chan struct{} // closed once the scopes are gone
}

// endUserScope is one end user's budget of one "user:*" budget.
type endUserScope struct {
	id   string // its budget's ID: weir.EndUserBudgetID
	refs int    // requests of this process that hold it
	last time.Time
}

// acquire notes a request of the end user's budget id at now, which
// holds it until release. A new id past the bound retires one idle
// enough (returned, for the caller to retire) or, if none is, is
// refused: ok false, with when to try again.
func (e *endUserScopes) acquire(id string, now time.Time, bound int) (retire string, wait <-chan struct{}, retryAfter time.Duration, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.byID == nil {
		e.lru, e.byID, e.retiring = list.New(), make(map[string]*list.Element), make(map[string]chan struct{})
	}
	if gone, ok := e.retiring[id]; ok {
		return "", gone, 0, false
	}
	if el, ok := e.byID[id]; ok {
		u := el.Value.(*endUserScope)
		u.refs++
		u.last = now
		e.lru.MoveToFront(el)
		return "", nil, 0, true
	}
	if e.lru.Len() >= bound {
		var soonest time.Duration = endUserIdle
		el := e.lru.Back()
		for range endUserScan {
			if el == nil {
				break
			}
			u := el.Value.(*endUserScope)
			idle := now.Sub(u.last)
			if u.refs == 0 && idle >= endUserIdle {
				retire = u.id
				e.lru.Remove(el)
				delete(e.byID, u.id)
				e.retiring[u.id] = make(chan struct{})
				break
			}
			if u.refs == 0 {
				soonest = min(soonest, endUserIdle-idle)
			}
			el = el.Prev()
		}
		if retire == "" {
			return "", nil, max(soonest, time.Second), false
		}
	}
	e.byID[id] = e.lru.PushFront(&endUserScope{id: id, refs: 1, last: now})
	return retire, nil, 0, true
}

// release ends a request's hold on the end user's budget id at now.
func (e *endUserScopes) release(id string, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if el, ok := e.byID[id]; ok {
		u := el.Value.(*endUserScope)
		u.refs--
		u.last = now
	}
}

// retired ends id's retirement: a request of it may set it again.
func (e *endUserScopes) retired(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	close(e.retiring[id])
	delete(e.retiring, id)
}

// drop retires every end user's budget of the "user:*" budget id (one
// gone), whatever they hold, and returns their IDs for the caller to
// retire.
func (e *endUserScopes) drop(id string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for el := e.lruFront(); el != nil; {
		next := el.Next()
		u := el.Value.(*endUserScope)
		if b, _, _ := weir.EndUserOfBudgetID(u.id); b == id {
			out = append(out, u.id)
			e.lru.Remove(el)
			delete(e.byID, u.id)
			e.retiring[u.id] = make(chan struct{})
		}
		el = next
	}
	return out
}

func (e *endUserScopes) lruFront() *list.Element {
	if e.lru == nil {
		return nil
	}
	return e.lru.Front()
}

// len is how many end users' budgets are set.
func (e *endUserScopes) len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lru == nil {
		return 0
	}
	return e.lru.Len()
}

// ensureEndUser sets the scope of b, the budget of one end user of a
// "user:*" budget, and holds it for the request until releaseEndUsers,
// retiring another end user's first if the bound says so.
func (s *Service) ensureEndUser(ctx context.Context, b weir.Budget, now time.Time) error {
	for {
		retire, wait, retryAfter, ok := s.endUsers.acquire(b.ID, now, s.cfg.MaxEndUserBudgets)
		if wait != nil {
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return ErrClientGone
			}
		}
		if !ok {
			s.deps.Metrics.DroppedError("end_user_budgets_full")
			return &Error{Category: ErrUnavailable, RetryAfter: retryAfter, Message: fmt.Sprintf(
				"this gateway holds the budgets of %d end users, none of them idle for %s: a new end user's cannot be set now",
				s.cfg.MaxEndUserBudgets, endUserIdle)}
		}
		if retire != "" {
			s.retireEndUser(ctx, retire)
		}
		if err := s.ensureBudgetScope(ctx, b, now); err != nil {
			s.endUsers.release(b.ID, now)
			return err
		}
		return nil
	}
}

// retireEndUser removes the scope of an end user's budget id and what
// this process keeps of it.
func (s *Service) retireEndUser(ctx context.Context, id string) {
	defer s.endUsers.retired(id)
	s.budgets.windows.Delete(id)
	s.alerts.forget(id)
	s.removeScope(context.WithoutCancel(ctx), weir.BudgetScope(id))
}

// forgetEndUserWindows drops this process's record of the windows of
// the end users' budgets among needs when admission found a scope gone
// (err): on a fleet another replica may have retired it at the leader,
// and the end user's next request sets it again.
func (s *Service) forgetEndUserWindows(err error, needs []admission.Need) {
	if !errors.Is(err, admission.ErrUnknownScope) {
		return
	}
	for _, n := range needs {
		if id, ok := weir.BudgetOfScope(n.Scope); ok {
			if _, _, ok := weir.EndUserOfBudgetID(id); ok {
				s.budgets.windows.Delete(id)
			}
		}
	}
}

// releaseEndUsers ends a request's hold on the end users' budgets among
// needs.
func (s *Service) releaseEndUsers(needs []admission.Need) {
	var now time.Time
	for _, n := range needs {
		id, ok := weir.BudgetOfScope(n.Scope)
		if !ok {
			continue
		}
		if _, _, ok := weir.EndUserOfBudgetID(id); ok {
			if now.IsZero() {
				now = s.deps.Clock.Now()
			}
			s.endUsers.release(id, now)
		}
	}
}
