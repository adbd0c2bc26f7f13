package header

import (
	"net/http"
	"net/textproto"
	"testing"
)

// TestGetIsHeaderGet: for a canonical key, Get answers as Header.Get
// does, whatever case the header was set in.
func TestGetIsHeaderGet(t *testing.T) {
	h := http.Header{}
	h.Set("x-request-id", "abc")
	h.Add("Cache-Control", "no-cache")
	h.Add("Cache-Control", "no-store")
	for _, key := range []string{"X-Request-Id", "Cache-Control", "Content-Type"} {
		if key != textproto.CanonicalMIMEHeaderKey(key) {
			t.Fatalf("%q is not canonical", key)
		}
		if got, want := Get(h, key), h.Get(key); got != want {
			t.Errorf("Get(%q) = %q; Header.Get says %q", key, got, want)
		}
	}
}
