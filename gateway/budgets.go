package gateway

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/provider"
)

// Budgets are engine scopes (docs/spend.md): each budget is the scope
// weir.BudgetScope(id), whose Budget is the budget's amount in its window. A
// request needs the budget scopes of its key, group and model, and each
// candidate those of its platform model besides, reserving the
// candidate's estimated cost (admission.Candidate.Cost) in each; the
// answer's real cost settles it. So a hard budget is exact as the
// engine's limits are, on one process and, through the fleet's leader,
// across replicas. A soft budget's scope is a shadow one: it refuses
// nothing, and its spend is there for its alerts. A scope's window is
// set before the request queues: the first request of a window reads
// what the window has spent from the store (what the engine has not
// counted itself), later ones find it set.

// BudgetSource is where budgets and their spend are kept: the stores
// implement it.
type BudgetSource interface {
	BudgetList(ctx context.Context, f weir.BudgetFilter) ([]weir.Budget, error)
	// SpendSum is what a subject has spent in a window, as recorded.
	SpendSum(ctx context.Context, f weir.SpendFilter) (weir.Money, error)
	// BudgetAlertClaim reports whether this caller is the first to claim
	// a budget's alert at a threshold in a window.
	BudgetAlertClaim(ctx context.Context, p *weir.BudgetAlertClaimParams) (bool, error)
}

// budgetBook is the budgets in force, by subject and by id, and the
// needs of each subject's budget scopes, made once here rather than on
// every request.
type budgetBook struct {
	bySubject map[weir.BudgetSubject][]weir.Budget
	needs     map[weir.BudgetSubject][]admission.Need
	byID      map[string]weir.Budget
	// everyEndUser are the budgets of every end user apart ("user:*"),
	// which have no scope of their own: each end user's budget has one
	// (endusers.go).
	everyEndUser []weir.Budget
}

func newBudgetBook(bs []weir.Budget) *budgetBook {
	b := &budgetBook{bySubject: make(map[weir.BudgetSubject][]weir.Budget),
		needs: make(map[weir.BudgetSubject][]admission.Need), byID: make(map[string]weir.Budget)}
	for _, x := range bs {
		b.byID[x.ID] = x
		if x.Subject.EveryEndUser() {
			b.everyEndUser = append(b.everyEndUser, x)
			continue
		}
		b.bySubject[x.Subject] = append(b.bySubject[x.Subject], x)
		b.needs[x.Subject] = append(b.needs[x.Subject], admission.Need{Scope: weir.BudgetScope(x.ID)})
	}
	return b
}

// get finds a budget by ID, an end user's budget of a "user:*" budget
// too.
func (b *budgetBook) get(id string) (weir.Budget, bool) {
	if b == nil {
		return weir.Budget{}, false
	}
	if x, ok := b.byID[id]; ok {
		return x, true
	}
	if every, user, ok := weir.EndUserOfBudgetID(id); ok {
		if x, ok := b.byID[every]; ok && x.Subject.EveryEndUser() {
			return x.ForEndUser(user), true
		}
	}
	return weir.Budget{}, false
}

func (b *budgetBook) of(typ, name string) []weir.Budget {
	if b == nil || name == "" {
		return nil
	}
	return b.bySubject[weir.BudgetSubject{Type: typ, Name: name}]
}

// ensure sets the windows of the budgets of subject (typ, name) at now
// and adds their scopes to needs.
func (b *budgetBook) ensure(ctx context.Context, s *Service, typ, name string, now time.Time, needs []admission.Need) ([]admission.Need, error) {
	for _, x := range b.of(typ, name) {
		if err := s.ensureBudgetScope(ctx, x, now); err != nil {
			return needs, err
		}
	}
	return append(needs, b.needs[weir.BudgetSubject{Type: typ, Name: name}]...), nil
}

// budgetWindow is the window a budget's scope is set to.
type budgetWindow struct {
	// set is the scope's window and budget as last set, read without
	// the lock by every request; mu is held to change it.
	set atomic.Pointer[windowSet]
	mu  sync.Mutex
	// spent is the BudgetSpent the scope was last set with.
	spent weir.Money
}

// windowSet is a budget scope's window and the budget it was set for.
type windowSet struct {
	from, until time.Time
	cfg         weir.Budget
}

// holds reports whether w is b's window at now.
func (w *windowSet) holds(b weir.Budget, now time.Time) bool {
	return w != nil && now.Before(w.until) && !now.Before(w.from) && sameBudget(w.cfg, b)
}

// budgetState is the service's budgets: the book, and each budget
// scope's window.
type budgetState struct {
	book    atomic.Pointer[budgetBook]
	windows sync.Map // budget id → *budgetWindow
}

// requestBudgets are the budgets a request reserves against: those of
// its tenant and model (every candidate's) and, by platform model, each
// candidate's own.
type requestBudgets struct {
	common []admission.Need
	byPM   map[string][]admission.Need
}

// prepareBudgets sets the windows of the budgets a request of key
// (counted against group) for model, naming endUser ("" none), may
// reserve against, on the platform models pms, before it queues: the
// engine is not to be called from a waiter's Resolve, which builds its
// candidates. The request holds its end user's budgets until
// releaseEndUsers(rb.common); on an error, nothing is held.
func (s *Service) prepareBudgets(ctx context.Context, key, group, model, endUser string, pms []string) (requestBudgets, error) {
	var rb requestBudgets
	book := s.budgets.book.Load()
	if book == nil || len(book.byID) == 0 {
		return rb, nil
	}
	now := s.deps.Clock.Now()
	var err error
	for _, subject := range [...]weir.BudgetSubject{{Type: "key", Name: key}, {Type: "group", Name: group}, {Type: "model", Name: model}, {Type: "user", Name: endUser}} {
		if rb.common, err = book.ensure(ctx, s, subject.Type, subject.Name, now, rb.common); err != nil {
			return rb, err
		}
	}
	if endUser != "" {
		for _, every := range book.everyEndUser {
			b := every.ForEndUser(endUser)
			if err := s.ensureEndUser(ctx, b, now); err != nil {
				s.releaseEndUsers(rb.common)
				return requestBudgets{}, err
			}
			rb.common = append(rb.common, admission.Need{Scope: weir.BudgetScope(b.ID)})
		}
	}
	if rb.byPM, err = s.ensurePMBudgets(ctx, book, now, pms, nil); err != nil {
		s.releaseEndUsers(rb.common)
		return requestBudgets{}, err
	}
	return rb, nil
}

// withPlatformModels is rb with the budgets of the platform models pms
// too, their windows set, for a waiting request moved to pms by a new
// catalog (requeue.go). rb is not changed.
func (s *Service) withPlatformModels(ctx context.Context, rb requestBudgets, pms []string) (requestBudgets, error) {
	book := s.budgets.book.Load()
	if book == nil || len(book.byID) == 0 {
		return rb, nil
	}
	byPM, err := s.ensurePMBudgets(ctx, book, s.deps.Clock.Now(), pms, maps.Clone(rb.byPM))
	if err != nil {
		return rb, err
	}
	rb.byPM = byPM
	return rb, nil
}

// ensurePMBudgets sets the windows of the budgets of each of pms that
// byPM has not, and adds their needs to it (made if nil and needed).
func (s *Service) ensurePMBudgets(ctx context.Context, book *budgetBook, now time.Time, pms []string, byPM map[string][]admission.Need) (map[string][]admission.Need, error) {
	for _, pm := range pms {
		if _, ok := byPM[pm]; ok {
			continue
		}
		needs, err := book.ensure(ctx, s, "platform_model", pm, now, nil)
		if err != nil {
			return byPM, err
		}
		if len(needs) > 0 {
			if byPM == nil {
				byPM = make(map[string][]admission.Need)
			}
			byPM[pm] = needs
		}
	}
	return byPM, nil
}

// ensureBudgetScope sets b's scope to its window at now, unless it is
// already: the window's spend so far is read from the store once per
// window. Every request calls it for each of its budgets, so the usual
// case, a window already set, allocates nothing.
func (s *Service) ensureBudgetScope(ctx context.Context, b weir.Budget, now time.Time) error {
	v, ok := s.budgets.windows.Load(b.ID)
	if !ok {
		v, _ = s.budgets.windows.LoadOrStore(b.ID, &budgetWindow{})
	}
	w := v.(*budgetWindow)
	if w.set.Load().holds(b, now) {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	set := w.set.Load()
	if set.holds(b, now) {
		return nil
	}
	from, until := b.Window.Bounds(now)
	spent := w.spent
	if set == nil || !from.Equal(set.from) {
		var err error
		if spent, err = s.spentBefore(ctx, b.Subject, from, until); err != nil {
			return &Error{Category: ErrUnavailable, Message: "the store could not say what the request's budgets have spent: nothing was done", RetryAfter: time.Second, Err: err}
		}
	}
	if err := s.deps.Engine.SetScope(ctx, weir.BudgetScope(b.ID), budgetScopeConfig(b, from, until, spent)); err != nil {
		return &Error{Category: ErrInternal, Message: "could not configure a budget's scope", Err: err}
	}
	w.spent = spent
	w.set.Store(&windowSet{from: from, until: until, cfg: b})
	return nil
}

// refreshBudgetSpentLocked sets each budget scope's BudgetSpent to what
// its engine has counted in the window, where that is more. The engine
// in force keeps its own count whatever BudgetSpent says; a fleet's next
// leader starts from the configurations the replicas give it, each with
// the spend the leader told that replica as leases settled where that is
// more (package fleet), so this keeps what it starts from at most a poll
// behind for what settled untold (a lease that expired, an async task's),
// rather than at the window's first request. Called with applyMu held.
func (s *Service) refreshBudgetSpentLocked(ctx context.Context) {
	book := s.budgets.book.Load()
	if book == nil || len(book.byID) == 0 {
		return
	}
	for _, st := range s.deps.Engine.Scopes(ctx) {
		id, ok := weir.BudgetOfScope(st.Name)
		if !ok {
			continue
		}
		v, ok := s.budgets.windows.Load(id)
		b, known := book.get(id)
		if !ok || !known {
			continue
		}
		w := v.(*budgetWindow)
		w.mu.Lock()
		if set := w.set.Load(); set != nil && st.BudgetFrom.Equal(set.from) && weir.Money(st.BudgetSpent) > w.spent && sameBudget(set.cfg, b) {
			spent := weir.Money(st.BudgetSpent)
			if err := s.deps.Engine.SetScope(ctx, st.Name, budgetScopeConfig(b, set.from, set.until, spent)); err == nil {
				w.spent = spent
			}
		}
		w.mu.Unlock()
	}
}

// sameBudget reports whether a and b set the same scope.
func sameBudget(a, b weir.Budget) bool {
	return a.Amount == b.Amount && a.Mode == b.Mode && a.Window == b.Window
}

// budgetScopeConfig is b's scope in the window [from, until) that had
// spent spent before it.
func budgetScopeConfig(b weir.Budget, from, until time.Time, spent weir.Money) admission.ScopeConfig {
	return admission.ScopeConfig{
		Budget:      int64(b.Amount),
		BudgetFrom:  from,
		BudgetUntil: until,
		BudgetSpent: int64(spent),
		Shadow:      b.Mode != weir.BudgetHard,
	}
}

// budgetExceeded is the answer to a request a hard budget refused.
func (s *Service) budgetExceeded(be *admission.BudgetExceededError) *Error {
	now := s.deps.Clock.Now()
	what, reset := "a budget", be.ResetAt
	if id, ok := weir.BudgetOfScope(be.Scope); ok {
		if b, ok := s.budgets.book.Load().get(id); ok {
			what = fmt.Sprintf("the budget of %s (%s a %s)", b.Subject, b.Amount, b.Window)
			if reset.IsZero() {
				_, reset = b.Window.Bounds(now)
			}
		}
	}
	msg := fmt.Sprintf("%s has too little left for this request's estimated cost", what)
	wait := time.Second
	if !reset.IsZero() {
		msg += "; it resets at " + reset.UTC().Format(time.RFC3339)
		wait = max(reset.Sub(now), wait)
	}
	return &Error{Category: ErrBudgetExceeded, Message: msg, RetryAfter: wait, NoRetry: true, Err: be}
}

// Budgets lists every budget in force: the store's, as it has them now,
// then those of the catalog served (its config file's, which the store
// does not keep).
func (s *Service) Budgets(ctx context.Context) ([]weir.Budget, error) {
	var bs []weir.Budget
	if s.deps.Budgets != nil {
		var err error
		if bs, err = s.deps.Budgets.BudgetList(ctx, weir.BudgetFilter{}); err != nil {
			return nil, err
		}
	}
	if st := s.state.Load(); st != nil {
		bs = append(slices.Clip(bs), st.budgets...)
	}
	return bs, nil
}

// reloadBudgets reads the budgets again, the store's and the catalog's,
// and sets at once the scopes of those whose amount, mode or window
// changed (a raised budget admits what it now fits); a budget gone
// retires its scope. Called with applyMu held.
func (s *Service) reloadBudgetsLocked(ctx context.Context) error {
	all, err := s.Budgets(ctx)
	if err != nil {
		return err
	}
	next := newBudgetBook(all)
	prev := s.budgets.book.Swap(next)
	for id, b := range next.byID {
		v, ok := s.budgets.windows.Load(id)
		if !ok {
			continue // set on first use
		}
		if set := v.(*budgetWindow).set.Load(); set != nil && !sameBudget(set.cfg, b) {
			if err := s.ensureBudgetScope(ctx, b, s.deps.Clock.Now()); err != nil {
				s.deps.Logger.Warn("could not change a budget's scope", "budget", id, "error", err)
			}
		}
	}
	s.refreshBudgetSpentLocked(ctx)
	if prev == nil {
		return nil
	}
	for id, b := range prev.byID {
		if _, ok := next.byID[id]; !ok {
			s.budgets.windows.Delete(id)
			if !b.Subject.EveryEndUser() {
				s.removeScope(ctx, weir.BudgetScope(id))
			}
			for _, each := range s.endUsers.drop(id) {
				s.retireEndUser(ctx, each)
			}
		}
	}
	return nil
}

// budgeted reports whether a candidate on the platform model pm ("" for
// a node) reserves against any budget.
func (rb requestBudgets) budgeted(pm string) bool {
	return len(rb.common) > 0 || len(rb.byPM[pm]) > 0
}

// needs are the budget scopes a candidate on pm ("" for a node) needs.
func (rb requestBudgets) needs(pm string) []admission.Need {
	return slices.Concat(rb.byPM[pm], rb.common)
}

// estimate is what r's request may cost on t, reserved against its
// budgets: 0 where it reserves against none (and Call.Estimate's, 0 in
// the simulation run mode).
func (r *routing) estimate(t target) weir.Money {
	if !r.budgets.budgeted(t.pm) {
		return 0
	}
	return r.c.Estimate(t.name())
}

// settle reconciles c's lease to the tokens and cost its answer
// reported, where the lease reserved any. ctx is the lease hold's, which
// the client's leaving does not cancel.
func (s *Service) settle(ctx context.Context, c *Call, lease admission.Lease, tokens int64, cost weir.Money) {
	if tokens <= 0 && len(c.budgets) == 0 {
		return
	}
	set := admission.Settlement{Tokens: tokens, Cost: int64(cost)}
	if tokens <= 0 {
		set.Tokens = lease.Tokens // no count came back: the estimate stands
	}
	if len(c.budgets) == 0 {
		set.Cost = lease.Cost
	}
	if err := s.deps.Engine.Reconcile(ctx, lease.ID, lease.Owner, set); err != nil {
		s.dropped(c, "reconcile", "could not settle a lease's tokens and cost", err)
	}
}

// settleRefused settles to nothing the budgets of a call its upstream
// answered with an error status: providers charge no error. A call that
// failed otherwise (a timeout, a broken connection, a client gone) may
// have been charged and keeps its reservation as spent. ctx is as
// settle's.
func (s *Service) settleRefused(ctx context.Context, c *Call, lease admission.Lease, err error) {
	if pe := (*provider.Error)(nil); len(c.budgets) > 0 && errors.As(err, &pe) && pe.Status != 0 {
		s.settle(ctx, c, lease, 0, 0)
	}
}

// spentBefore is what subject spent in [from, until) as recorded; 0
// without a store.
func (s *Service) spentBefore(ctx context.Context, subject weir.BudgetSubject, from, until time.Time) (weir.Money, error) {
	if s.deps.Budgets == nil {
		return 0, nil
	}
	return s.deps.Budgets.SpendSum(ctx, weir.SpendFilter{Subject: subject, From: from, Until: until})
}

// Journal records what admitted requests reserved against budgets, so
// that a crash before their usage is written counts them at their
// estimate (docs/budgets.md, "After a crash"): usage.Recorder.
type Journal interface {
	Reserve(r weir.Reservation)
}

// journal records the cost lease reserved for c, if any.
func (s *Service) journal(c *Call, lease admission.Lease) {
	if lease.Cost <= 0 || s.deps.Journal == nil || c.Usage.RequestID == "" {
		return
	}
	s.deps.Journal.Reserve(weir.Reservation{RequestID: c.Usage.RequestID, KeyID: c.KeyID, Group: c.Group,
		Model: c.Model.Name, PlatformModel: c.Usage.PlatformModel, EndUser: c.Usage.EndUser,
		Estimate: weir.Money(lease.Cost), At: s.deps.Clock.Now()})
}
