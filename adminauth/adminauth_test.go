package adminauth

import (
	"net/http/httptest"
	"testing"
)

func TestToken(t *testing.T) {
	t.Parallel()
	tok := NewToken("s3cret")
	for _, c := range []struct {
		s    string
		want bool
	}{{"s3cret", true}, {"s3cre", false}, {"s3cret ", false}, {"", false}} {
		if got := tok.Is(c.s); got != c.want {
			t.Errorf("Is(%q) = %v, want %v", c.s, got, c.want)
		}
	}
}

func TestBearer(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ header, want string }{
		{"Bearer abc", "abc"}, {"bearer  abc ", "abc"}, {"Basic abc", ""}, {"Bearer", ""}, {"", ""},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		if got := Bearer(r); got != c.want {
			t.Errorf("Bearer(%q) = %q, want %q", c.header, got, c.want)
		}
	}
}

func TestIsLoopback(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		addr string
		want bool
	}{{"127.0.0.1:80", true}, {"[::1]:80", true}, {"::1", true}, {"10.0.0.1:80", false}, {"localhost:80", false}, {"", false}} {
		if got := IsLoopback(c.addr); got != c.want {
			t.Errorf("IsLoopback(%q) = %v, want %v", c.addr, got, c.want)
		}
	}
}
