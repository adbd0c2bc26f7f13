package weir

import "testing"

// TestAcceptanceScopeNames: the acceptance runs' copy of a scope is read
// back as its production scope, for the platform model a lease was
// admitted to and for messages.
func TestAcceptanceScopeNames(t *testing.T) {
	t.Parallel()
	copyOf := AcceptanceScope(PlatformModelScope("up/m"))
	if pm, ok := PlatformModelOfScope(copyOf); !ok || pm != "up/m" {
		t.Errorf("PlatformModelOfScope(%s) = %q, %v; want up/m", copyOf, pm, ok)
	}
	if got, want := ScopeLabel(copyOf), "the acceptance runs' platform model up/m"; got != want {
		t.Errorf("ScopeLabel(%s) = %q, want %q", copyOf, got, want)
	}
	if prod, ok := AcceptanceOf(copyOf); !ok || prod != PlatformModelScope("up/m") {
		t.Errorf("AcceptanceOf(%s) = %q, %v", copyOf, prod, ok)
	}
	if _, ok := PlatformModelOfScope(AcceptanceScope("global:tasks")); ok {
		t.Error("the acceptance share of the workers read as a platform model's scope")
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
		{AcceptanceScope(PlatformModelScope("up/m")), "", false},
		{GroupScope("key:x"), "", false},
		{PlatformModelScope("up/m"), "", false},
		{NodeScope("key", "p"), "", false},
	} {
		if key, ok := KeyOfScope(c.scope); key != c.key || ok != c.ok {
			t.Errorf("KeyOfScope(%q) = %q, %v; want %q, %v", c.scope, key, ok, c.key, c.ok)
		}
	}
}
