package weir

import "testing"

// TestAcceptanceScopeNames: a run's copy of a scope is read back as its
// production scope, for the platform model a lease was admitted to and
// for messages.
func TestAcceptanceScopeNames(t *testing.T) {
	t.Parallel()
	copyOf := AcceptanceScope("run-1", PlatformModelScope("up/m"))
	if pm, ok := PlatformModelOfScope(copyOf); !ok || pm != "up/m" {
		t.Errorf("PlatformModelOfScope(%s) = %q, %v; want up/m", copyOf, pm, ok)
	}
	if got, want := ScopeLabel(copyOf), "acceptance run run-1's platform model up/m"; got != want {
		t.Errorf("ScopeLabel(%s) = %q, want %q", copyOf, got, want)
	}
	if _, ok := PlatformModelOfScope(AcceptanceScope("run-1", KeyScope("k"))); ok {
		t.Error("a copy of a key's scope read as a platform model's")
	}
	for _, id := range []string{"", "a/b", "a b", string(make([]byte, MaxRunID+1))} {
		if ValidRunID(id) {
			t.Errorf("ValidRunID(%q) = true", id)
		}
	}
	if !ValidRunID("new-platform_2.1") {
		t.Error("ValidRunID refused a good id")
	}
}

func TestKeyOfScope(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		scope, key string
		ok         bool
	}{
		{KeyScope("key_1"), "key_1", true},
		{AcceptanceScope("run-1", KeyScope("key_1")), "key_1", true},
		{GroupScope("key:x"), "", false},
		{PlatformModelScope("up/m"), "", false},
		{NodeScope("key", "p"), "", false},
	} {
		if key, ok := KeyOfScope(c.scope); key != c.key || ok != c.ok {
			t.Errorf("KeyOfScope(%q) = %q, %v; want %q, %v", c.scope, key, ok, c.key, c.ok)
		}
	}
}
