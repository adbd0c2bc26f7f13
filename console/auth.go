package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/weir-gateway/weir/adminauth"
	"github.com/weir-gateway/weir/clock"
)

// cookieName is the session cookie's name.
const cookieName = "weir_console"

// csrfHeader carries an action's CSRF token.
const csrfHeader = "X-Weir-Csrf"

// access says how a request got in, if it did.
type access int

const (
	denied   access = iota
	loopback        // a loopback client, no token configured and loopback trusted
	session         // a session cookie from the login form
	bearer          // the admin token as a bearer token (scripts, weir queues --watch)
)

// sessions holds the live sessions (random ids, by the hash of the id so
// that a timing leak in the map says nothing of an id), bounded: past
// maxSessions the one that expires first goes.
type sessions struct {
	mu    sync.Mutex
	clock clock.Clock
	ttl   time.Duration
	byID  map[[sha256.Size]byte]time.Time
}

const maxSessions = 1000

func (s *sessions) create() (string, time.Time, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", time.Time{}, err
	}
	id := base64.RawURLEncoding.EncodeToString(b[:])
	now := s.clock.Now()
	exp := now.Add(s.ttl)
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, e := range s.byID {
		if !now.Before(e) {
			delete(s.byID, k)
		}
	}
	if len(s.byID) >= maxSessions {
		var first [sha256.Size]byte
		var at time.Time
		for k, e := range s.byID {
			if at.IsZero() || e.Before(at) {
				first, at = k, e
			}
		}
		delete(s.byID, first)
	}
	s.byID[sha256.Sum256([]byte(id))] = exp
	return id, exp, nil
}

func (s *sessions) valid(id string) bool {
	if id == "" {
		return false
	}
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.byID[k]
	if ok && !s.clock.Now().Before(exp) {
		delete(s.byID, k)
		return false
	}
	return ok
}

func (s *sessions) end(id string) {
	s.mu.Lock()
	delete(s.byID, sha256.Sum256([]byte(id)))
	s.mu.Unlock()
}

// access finds how r gets in: the admin token as a bearer token, a live
// session cookie, or (with no token configured) a trusted loopback
// client that names a loopback host. It is the admin API's rule, with
// the login form's cookie added.
func (c *Console) access(r *http.Request) access {
	if c.cfg.AdminToken != "" {
		if t := adminauth.Bearer(r); t != "" && c.token.Is(t) {
			return bearer
		}
		if ck, err := r.Cookie(cookieName); err == nil && c.sessions.valid(ck.Value) {
			return session
		}
		return denied
	}
	if c.cfg.Loopback && adminauth.IsLoopback(r.RemoteAddr) && adminauth.TrustedHost(r.Host, c.public.Host) {
		return loopback
	}
	return denied
}

// hostRefused reports whether r is refused for the host it names: while
// loopback alone vouches for clients (no admin token), a request must
// name a loopback host or the public one, so that another site's page
// whose name resolves to 127.0.0.1 (DNS rebinding) gets nothing, not
// even the page and its CSRF token.
func (c *Console) hostRefused(r *http.Request) bool {
	return c.cfg.AdminToken == "" && c.cfg.Loopback && !adminauth.TrustedHost(r.Host, c.public.Host)
}

// csrfToken is the token an action must carry: an HMAC of the session
// (or of "loopback") under a key made at start, so a page of another
// origin, which cannot read the console's answers, cannot know it.
func (c *Console) csrfToken(r *http.Request) string {
	subject := "loopback"
	if ck, err := r.Cookie(cookieName); err == nil && c.cfg.AdminToken != "" {
		subject = "session:" + ck.Value
	}
	mac := hmac.New(sha256.New, c.csrfKey[:])
	mac.Write([]byte(subject))
	return hex.EncodeToString(mac.Sum(nil))
}

// sameOrigin reports whether a browser says r comes from the console's
// own pages: Sec-Fetch-Site, when sent, must be same-origin (or none: the
// user typed it), and Origin, when sent, must be this host or the public
// URL's origin (behind a TLS-terminating proxy the browser's origin is
// https while this request came in over http).
func (c *Console) sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		scheme := "http://"
		if r.TLS != nil {
			scheme = "https://"
		}
		if o != scheme+r.Host && (c.public.Host == "" || o != c.public.Scheme+"://"+c.public.Host) {
			return false
		}
	}
	return true
}

// secure reports whether the session cookie must be Secure: over TLS, or
// when the public URL is https (a TLS-terminating proxy in front).
func (c *Console) secure(r *http.Request) bool {
	return r.TLS != nil || c.public.Scheme == "https"
}

// csrfOK checks an action: a bearer caller is no browser riding a cookie;
// anyone else must come from the same origin and carry the CSRF token.
func (c *Console) csrfOK(r *http.Request, a access) bool {
	if a == bearer {
		return true
	}
	if !c.sameOrigin(r) {
		return false
	}
	got := r.Header.Get(csrfHeader)
	want := c.csrfToken(r)
	return len(got) == len(want) && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
