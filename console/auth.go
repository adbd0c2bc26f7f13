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

// limiter bounds login attempts: perIP a minute from one address, and
// total a minute from all of them (so that many addresses cannot guess
// faster). Its map is bounded; when full it starts afresh, which lets an
// address in early at worst.
type limiter struct {
	mu     sync.Mutex
	clock  clock.Clock
	perIP  int
	total  int
	window time.Time
	byIP   map[string]int
	all    int
}

const maxLimiterIPs = 10_000

// allow counts an attempt from ip and reports whether it may go ahead,
// and if not, when to try again.
func (l *limiter) allow(ip string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	if now.Sub(l.window) >= time.Minute || len(l.byIP) >= maxLimiterIPs {
		l.window, l.byIP, l.all = now, make(map[string]int), 0
	}
	wait := time.Minute - now.Sub(l.window)
	if l.byIP[ip] >= l.perIP || l.all >= l.total {
		return false, wait
	}
	l.byIP[ip]++
	l.all++
	return true, 0
}

// access finds how r gets in: the admin token as a bearer token, a live
// session cookie, or (with no token configured) a trusted loopback
// client. It is the admin API's rule, with the login form's cookie added.
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
	if c.cfg.Loopback && adminauth.IsLoopback(r.RemoteAddr) {
		return loopback
	}
	return denied
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
// user typed it), and Origin, when sent, must be this host.
func sameOrigin(r *http.Request) bool {
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
		if o != scheme+r.Host {
			return false
		}
	}
	return true
}

// csrfOK checks an action: a bearer caller is no browser riding a cookie;
// anyone else must come from the same origin and carry the CSRF token.
func (c *Console) csrfOK(r *http.Request, a access) bool {
	if a == bearer {
		return true
	}
	if !sameOrigin(r) {
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
