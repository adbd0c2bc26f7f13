package fleet

import (
	"context"

	"github.com/weir-gateway/weir/admission"
)

// What a budget spent, carried to the next leader (see the package doc,
// "A new leader"). A new leader starts each budget window from what the
// replicas give it; the leader tells them each budget scope's spend as
// its leases settle, on the frames that go anyway — the reply to a
// release, to the replica that released, and the mirror's removal of a
// lease of the leader's own replica, to every replica — and each keeps
// the latest per scope and gives it with its next sync. Within a window
// spend only grows, so the new leader keeps the largest figure it is
// given (admission.Memory.SpendAtLeast), whichever replica gives it.

// wireSpend is what a budget scope had spent in its window when a lease
// settled there: its window's start (Unix nanoseconds) and the cost
// settled since.
type wireSpend struct {
	Scope string `json:"scope"`
	From  int64  `json:"from"`
	Spent int64  `json:"spent"`
}

// onSpend keeps a settlement's spend (admission.Options.OnSpend): it
// runs under the engine's lock, and takes l.mu, as observe does.
func (l *leader) onSpend(s admission.Spend) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.spends[s.Scope] = wireSpend{Scope: s.Scope, From: s.From.UnixNano(), Spent: s.Spent}
}

// needsOfLocked are the scopes lease id, held here, needs.
func (l *leader) needsOfLocked(id admission.LeaseID) []admission.Need {
	p := l.owners[id]
	if p == nil || p.leases[id] == nil {
		return nil
	}
	if req := p.leases[id].req; req != nil && len(req.Candidates) > 0 {
		return req.Candidates[0].Needs
	}
	return nil
}

// spentLocked is the spend of each budget scope among needs.
func (l *leader) spentLocked(needs []admission.Need) []wireSpend {
	var out []wireSpend
	for _, n := range needs {
		if s, ok := l.spends[n.Scope]; ok {
			out = append(out, s)
		}
	}
	return out
}

// spentAfter is the spend of the budget scopes among needs, now.
func (l *leader) spentAfter(needs []admission.Need) []wireSpend {
	if len(needs) == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.spentLocked(needs)
}

// noteSpent keeps the spend a leader told, the latest per scope: the
// larger within a window, the one told last across windows.
func (e *Engine) noteSpent(ss []wireSpend) {
	if len(ss) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.noteSpentLocked(ss)
}

func (e *Engine) noteSpentLocked(ss []wireSpend) {
	for _, s := range ss {
		if old, ok := e.spent[s.Scope]; !ok || old.From != s.From || s.Spent > old.Spent {
			e.spent[s.Scope] = s
		}
	}
}

// forgetSpend drops what a removed scope spent.
func (l *leader) forgetSpend(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.spends, name)
}

// spentConfigLocked is cfg, scope name's configuration, with the spend
// a leader told for its window where that is more than it says.
func (e *Engine) spentConfigLocked(name string, cfg admission.ScopeConfig) admission.ScopeConfig {
	if s, ok := e.spent[name]; ok && cfg.Budget > 0 && s.From == cfg.BudgetFrom.UnixNano() && s.Spent > cfg.BudgetSpent {
		cfg.BudgetSpent = s.Spent
	}
	return cfg
}

// raiseSpent makes the spend a replica's configuration of scope name
// gives count here where it is more than this leader counted for the
// same window: a replica that synced earlier may have given less, and
// SetScope keeps the first figure of a window.
func (l *leader) raiseSpent(ctx context.Context, name string, cfg admission.ScopeConfig) {
	if cfg.Budget > 0 && cfg.BudgetSpent > 0 {
		dropped(l.cfg, l.logger, "spend", l.mem.SpendAtLeast(ctx, name, cfg.BudgetFrom, cfg.BudgetSpent))
	}
}
