package weir

import "strings"

// The admission scopes the catalog makes, by name: every request needs
// its key's, its group's and its platform model's.
func KeyScope(keyID string) string        { return "key:" + keyID }
func GroupScope(group string) string      { return "group:" + group }
func PlatformModelScope(pm string) string { return pmScopePrefix + pm }

const pmScopePrefix = "pm:"

// PlatformModelOfScope returns the platform model a scope is for, and
// whether it is a platform model's scope.
func PlatformModelOfScope(scope string) (string, bool) {
	return strings.CutPrefix(scope, pmScopePrefix)
}

// ScopeLabel names a scope as the catalog's users know it, for messages:
// "platform model up/m", "key key_1", "group default"; any other scope as
// "scope <name>".
func ScopeLabel(scope string) string {
	if pm, ok := PlatformModelOfScope(scope); ok {
		return "platform model " + pm
	}
	if k, ok := strings.CutPrefix(scope, "key:"); ok {
		return "key " + k
	}
	if g, ok := strings.CutPrefix(scope, "group:"); ok {
		return "group " + g
	}
	return "scope " + scope
}
