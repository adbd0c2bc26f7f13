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

func TestTrustedHost(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		host, public string
		want         bool
	}{
		{"127.0.0.1:8080", "", true},
		{"127.0.0.1", "", true},
		{"127.8.9.10:80", "", true},
		{"[::1]:8080", "", true},
		{"[::1]", "", true},
		{"localhost:8080", "", true},
		{"LocalHost.:8080", "", true},
		{"weir.localhost:8080", "", true},
		{"evil.example", "", false},
		{"evil.example:8080", "", false},
		{"localhost.evil.example:8080", "", false},
		{"evillocalhost:8080", "", false},
		{"127.0.0.1.evil.example", "", false},
		{"0.0.0.0:8080", "", false},
		{"10.0.0.1:8080", "", false},
		{"[fe80::1%25eth0]:8080", "", false},
		{"", "", false},
		{"weir.example.com", "weir.example.com", true},
		{"Weir.Example.com:443", "weir.example.com", true},
		{"weir.example.com", "weir.example.com:8443", true},
		{"evil.example", "weir.example.com", false},
	} {
		if got := TrustedHost(c.host, c.public); got != c.want {
			t.Errorf("TrustedHost(%q, %q) = %v, want %v", c.host, c.public, got, c.want)
		}
	}
}
