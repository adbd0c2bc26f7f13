package weir

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// The admission scopes the catalog makes, by name: every request needs
// its key's, its group's and its platform model's.
func KeyScope(keyID string) string        { return keyScopePrefix + keyID }
func GroupScope(group string) string      { return "group:" + group }
func PlatformModelScope(pm string) string { return pmScopePrefix + pm }

const pmScopePrefix = "pm:"

// AcceptanceScope is the acceptance runs' copy of the production scope
// scope (RunAcceptance): one copy, shared by every run, which acceptance
// requests need in its place. The gateway copies a platform model's
// scope ("acceptance:pm:up/m") and the task service its workers' pool
// ("acceptance:global:tasks", a share of it rather than a copy); a
// tenant's scopes are never copied.
func AcceptanceScope(scope string) string { return acceptancePrefix + scope }

const acceptancePrefix = "acceptance:"

// AcceptanceOf is the production scope that scope is the acceptance
// copy of; ok is false for any other scope.
func AcceptanceOf(scope string) (production string, ok bool) {
	return strings.CutPrefix(scope, acceptancePrefix)
}

// The scopes an edge node's session makes: a provider's slots, and the
// long-context slots a long request needs too. Both belong to the node's
// owner id, at the session's generation.
func NodeScope(nodeID, provider string) string     { return nodeScopePrefix + nodeID + "/" + provider }
func NodeLongScope(nodeID, provider string) string { return NodeScope(nodeID, provider) + "/long" }

// ErrNodeGone marks a call to an edge node that never reached it: its
// session had ended. With no other candidate left, a request so failed
// has no candidate, rather than a failed upstream.
var ErrNodeGone = errors.New("the edge node's session has ended")

// ErrNodeStalled marks a run on an edge node that made no progress for
// the node's stall timeout before any of its answer reached the client:
// the request may move to another candidate, a handoff its usage record
// says (Usage.Handoff).
var ErrNodeStalled = errors.New("the edge node's run stalled")

// NodeOwner is the admission owner id of a node's scopes and leases.
func NodeOwner(nodeID string) string { return nodeScopePrefix + nodeID }

const nodeScopePrefix = "node:"

// PlatformModelOfScope returns the platform model a scope is for, and
// whether it is a platform model's scope (or the acceptance runs' copy of
// one).
func PlatformModelOfScope(scope string) (string, bool) {
	if prod, ok := AcceptanceOf(scope); ok {
		scope = prod
	}
	return strings.CutPrefix(scope, pmScopePrefix)
}

// KeyOfScope returns the key a scope is for, and whether it is a key's
// scope. Every candidate of a request needs one key scope, its key's
// (acceptance runs' included: a tenant's scopes are never copied), so the
// key scopes count each request once: a request waits in one of them and
// holds a lease in one.
func KeyOfScope(scope string) (string, bool) {
	if key, ok := strings.CutPrefix(scope, keyScopePrefix); ok {
		return key, true
	}
	return "", false
}

const keyScopePrefix = "key:"

// ScopeLabel names a scope as the catalog's users know it, for messages:
// "platform model up/m", "key key_1", "group default"; any other scope as
// "scope <name>".
func ScopeLabel(scope string) string {
	if prod, ok := AcceptanceOf(scope); ok {
		return "the acceptance runs' " + ScopeLabel(prod)
	}
	if pm, ok := PlatformModelOfScope(scope); ok {
		return "platform model " + pm
	}
	if k, ok := strings.CutPrefix(scope, "key:"); ok {
		return "key " + k
	}
	if g, ok := strings.CutPrefix(scope, "group:"); ok {
		return "group " + g
	}
	if id, ok := BudgetOfScope(scope); ok {
		return "budget " + id
	}
	if n, ok := strings.CutPrefix(scope, nodeScopePrefix); ok {
		if p, ok := strings.CutSuffix(n, "/long"); ok && strings.Count(n, "/") == 2 {
			return "node provider " + p + "'s long-context slots"
		}
		return "node provider " + n
	}
	return "scope " + scope
}

// QueueFullText says which queue was full, for messages: "the queue of
// platform model up/m is full (queue_limit 100)".
func QueueFullText(scope string, queueLimit int) string {
	return fmt.Sprintf("the queue of %s is full (queue_limit %d)", ScopeLabel(scope), queueLimit)
}

// MaxWaitText names a scope's max_wait, for messages: "platform model
// up/m's max_wait (2s)".
func MaxWaitText(scope string, maxWait time.Duration) string {
	return fmt.Sprintf("%s's max_wait (%s)", ScopeLabel(scope), maxWait)
}

// budgetScopePrefix begins the scope of a budget.
const budgetScopePrefix = "budget:"

// BudgetScope is the engine scope that holds budget id: its amount in
// its window (docs/budgets.md).
func BudgetScope(id string) string { return budgetScopePrefix + id }

// BudgetOfScope is the id of the budget whose scope is scope, if it is
// one.
func BudgetOfScope(scope string) (string, bool) {
	id, ok := strings.CutPrefix(scope, budgetScopePrefix)
	return id, ok && id != ""
}
