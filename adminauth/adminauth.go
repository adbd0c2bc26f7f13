// Package adminauth is what the admin API and the console decide an
// operator's access by, so that both follow one rule: the admin token,
// compared in constant time; the bearer token of a request; and whether
// a client is on loopback.
package adminauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
)

// Token is the admin token, kept as its hash.
type Token struct {
	hash [sha256.Size]byte
}

// NewToken keeps token.
func NewToken(token string) Token { return Token{hash: sha256.Sum256([]byte(token))} }

// Is reports whether s is the token. It compares their hashes in
// constant time, so that neither how much of a guess is right nor how
// long the token is shows in the time the answer takes.
func (t Token) Is(s string) bool {
	got := sha256.Sum256([]byte(s))
	return subtle.ConstantTimeCompare(got[:], t.hash[:]) == 1
}

// Bearer is r's bearer token ("" if none).
func Bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// IsLoopback reports whether addr (host:port, or a host) is a loopback
// address.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
