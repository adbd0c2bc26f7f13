// Package adminauth is what the admin API and the console decide an
// operator's access by, so that both follow one rule: the admin token,
// compared in constant time; the bearer token of a request; whether a
// client is on loopback; and, while loopback is all that vouches for a
// client, whether the name it asked for is this machine's.
//
// # DNS rebinding
//
// Trusting loopback clients without a token trusts whatever runs on the
// machine, browsers included, and a browser can be made to send a
// request to 127.0.0.1 on behalf of a page of another site: a name the
// attacker controls is made to resolve to 127.0.0.1 after the page has
// loaded, so that the page's own origin now reaches the gateway and may
// read its answers. Such a request names the attacker's host in its Host
// header. So, while trust comes from loopback alone, a request must name
// a loopback host (TrustedHost); a request that carries the admin token
// proves itself and may name any.
package adminauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/weir-gateway/weir/internal/header"
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
	h := header.Get(r.Header, "Authorization")
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

// TrustedHost reports whether host, a request's Host header, names this
// machine's loopback, or public (the gateway's public host name, from
// server.public_url; "" for none). Loopback names are IP literals in
// 127.0.0.0/8 and ::1 (bracketed with a port), "localhost" and any name
// under ".localhost", which RFC 6761 reserves for loopback: public DNS
// answers none of them, and browsers resolve them to loopback themselves,
// so a page of another site cannot be served under them. A port, a
// trailing dot and letter case do not matter. An empty host (an HTTP/1.0
// request that named none) is refused.
func TrustedHost(host, public string) bool {
	name := hostName(host)
	if name == "" {
		return false
	}
	if public != "" && name == hostName(public) {
		return true
	}
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(name)
	return err == nil && ip.Zone() == "" && ip.Unmap().IsLoopback()
}

// HostRefusal says why a loopback client's request naming host was
// refused, and what lets it in.
func HostRefusal(host string) string {
	if len(host) > 100 {
		host = host[:100] + "…"
	}
	return fmt.Sprintf("Host %q is not this machine's name: without an admin token only requests for 127.0.0.1, [::1] or localhost "+
		"(or server.public_url's host) are trusted, so that another site's page cannot reach the gateway through a name "+
		"that resolves to 127.0.0.1 (DNS rebinding); use one of those names, or set server.admin_token", host)
}

// hostName is host without its port, brackets and trailing dot, in lower
// case.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}
