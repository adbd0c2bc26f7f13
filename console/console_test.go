package console

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/sqlite"
)

type testBundle struct {
	console *Console
	clock   *clock.Fake
	engine  *admission.Memory
	gw      *gateway.Service
	store   *sqlite.DB
	handler http.Handler
}

const adminToken = "the-admin-token"

// setup builds a console over a real gateway service, engine and SQLite
// store, on a fake clock, with cfg (AdminToken and Loopback as given),
// for a catalog of one model m on platform model up/m (concurrency 2).
func setup(t *testing.T, cfg Config) *testBundle {
	t.Helper()
	return setupWith(t, cfg, weir.Catalog{
		Platforms:      []weir.Platform{{Name: "up", Kind: "openai", BaseURL: "http://127.0.0.1:1/v1"}},
		PlatformModels: []weir.PlatformModel{{Name: "up/m", Platform: "up", Upstream: "x", Limits: weir.Limits{Concurrency: 2}}},
		Models:         []weir.Model{{Name: "m", Kind: weir.KindChat, Candidates: []weir.Candidate{{PlatformModel: "up/m"}}}},
	}, nil)
}

// setupWith is setup for the catalog cat, with the edge nodes nodes.
func setupWith(t *testing.T, cfg Config, cat weir.Catalog, nodes []weir.NodeView) *testBundle {
	t.Helper()
	return setupDeps(t, cfg, cat, func(d *Deps) {
		if nodes != nil {
			d.Nodes = func(context.Context) []weir.NodeView { return nodes }
		}
	})
}

// setupDeps is setup for the catalog cat, with change made to the
// console's Deps.
func setupDeps(t *testing.T, cfg Config, cat weir.Catalog, change func(*Deps)) *testBundle {
	t.Helper()
	fc := clock.NewFake(time.Unix(1_700_000_000, 0))
	b := &testBundle{clock: fc}
	rec := NewRecorder()
	b.engine = admission.NewMemory(admission.Options{Clock: fc, Observer: rec})
	t.Cleanup(b.engine.Close)
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "weir.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	b.store = db
	b.gw = gateway.New(gateway.Config{}, gateway.Deps{Engine: b.engine, Keys: db, Clock: fc})
	if err := b.gw.Apply(t.Context(), cat, ""); err != nil {
		t.Fatal(err)
	}
	deps := Deps{Gateway: b.gw, Operator: b.gw, Keys: db, Recorder: rec, Clock: fc}
	change(&deps)
	b.console = New(cfg, deps)
	if err := b.console.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.console.Stop(context.Background()) })
	b.handler = b.console.Handler()
	return b
}

// testHost is the Host the tests' requests name unless they say
// another (a "Host" in their headers).
const testHost = "127.0.0.1:8080"

// do serves one request from remote (host:port), with the given headers.
func (b *testBundle) do(method, path, remote string, body string, hdr map[string]string) *httptest.ResponseRecorder {
	return b.doCtx(context.Background(), method, path, remote, body, hdr)
}

// doCtx is do with the request's context.
func (b *testBundle) doCtx(ctx context.Context, method, path, remote string, body string, hdr map[string]string) *httptest.ResponseRecorder {
	var r *http.Request
	if body != "" {
		r = httptest.NewRequestWithContext(ctx, method, path, strings.NewReader(body))
	} else {
		r = httptest.NewRequestWithContext(ctx, method, path, nil)
	}
	r.RemoteAddr = remote
	r.Host = testHost
	for k, v := range hdr {
		if k == "Host" {
			r.Host = v
			continue
		}
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	b.handler.ServeHTTP(w, r)
	return w
}

// login posts the admin token and returns the session cookie.
func (b *testBundle) login(t *testing.T) *http.Cookie {
	t.Helper()
	w := b.do("POST", "/console/login", "10.0.0.9:5000", "token="+adminToken, map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	if w.Code != http.StatusSeeOther {
		t.Fatalf("login: %d %s", w.Code, w.Body)
	}
	for _, c := range w.Result().Cookies() {
		if c.Name == cookieName {
			return c
		}
	}
	t.Fatal("login set no session cookie")
	return nil
}

func TestAccess(t *testing.T) {
	t.Parallel()
	withToken := setup(t, Config{AdminToken: adminToken})
	_, apiKey := createKey(t, withToken)
	cookie := withToken.login(t)
	loopback := setup(t, Config{Loopback: true})
	closed := setup(t, Config{})
	for _, c := range []struct {
		name   string
		b      *testBundle
		remote string
		hdr    map[string]string
		want   int
	}{
		{"token set, nothing sent", withToken, "10.0.0.1:1", nil, 401},
		{"token set, loopback is not enough", withToken, "127.0.0.1:1", nil, 401},
		{"token set, the admin token as bearer", withToken, "10.0.0.1:1", map[string]string{"Authorization": "Bearer " + adminToken}, 200},
		{"token set, an API key never", withToken, "127.0.0.1:1", map[string]string{"Authorization": "Bearer " + apiKey}, 401},
		{"token set, a wrong token", withToken, "10.0.0.1:1", map[string]string{"Authorization": "Bearer nope"}, 401},
		{"token set, the session cookie", withToken, "10.0.0.1:1", map[string]string{"Cookie": cookie.String()}, 200},
		{"token set, a made-up cookie", withToken, "10.0.0.1:1", map[string]string{"Cookie": cookieName + "=abc"}, 401},
		{"no token, loopback trusted", loopback, "127.0.0.1:1", nil, 200},
		{"no token, loopback trusted, remote", loopback, "10.0.0.1:1", nil, 403},
		{"no token, loopback not trusted", closed, "127.0.0.1:1", nil, 403},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, path := range []string{"/console/api/session", "/console/api/keys", "/console/api/queue?scope=pm:up/m"} {
				w := c.b.do("GET", path, c.remote, "", c.hdr)
				if w.Code != c.want {
					t.Errorf("GET %s: %d; want %d: %s", path, w.Code, c.want, w.Body)
				}
				if w.Code >= 400 {
					var e struct {
						Error struct{ Code, Message string }
					}
					if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
						t.Errorf("GET %s: not the API's error shape: %s", path, w.Body)
					}
				}
			}
			// The page itself: the console, or the login form.
			w := c.b.do("GET", "/", c.remote, "", c.hdr)
			if got := strings.Contains(w.Body.String(), `name="weir-csrf"`); got != (c.want == 200) {
				t.Errorf("GET /: %d, console page %t; want it %t", w.Code, got, c.want == 200)
			}
		})
	}
	// After logout the cookie opens nothing.
	csrf := csrfFor(t, withToken, cookie)
	w := withToken.do("POST", "/console/logout", "10.0.0.1:1", "{}", map[string]string{"Cookie": cookie.String(), csrfHeader: csrf, "Content-Type": "application/json"})
	if w.Code != 200 {
		t.Fatalf("logout: %d %s", w.Code, w.Body)
	}
	if w := withToken.do("GET", "/console/api/session", "10.0.0.1:1", "", map[string]string{"Cookie": cookie.String()}); w.Code != 401 {
		t.Errorf("after logout: %d", w.Code)
	}
}

// TestForeignHostRefusedOnLoopbackTrust: while loopback alone vouches
// for clients, a page of another site whose name resolves to 127.0.0.1
// (DNS rebinding) names its own host, and gets nothing: not the page nor
// its CSRF token, no view, no action, in the API's error shape. Loopback
// names and the public URL's host get in; with an admin token the Host
// does not matter.
func TestForeignHostRefusedOnLoopbackTrust(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Loopback: true, PublicURL: "http://weir.lan:8080"})
	csrf := csrfFor(t, b, nil)
	// A stream let in would run until its request ends: end it at once.
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	for _, host := range []string{"evil.example:8080", "evil.example", "127.0.0.1.nip.io:8080", "0.0.0.0:8080", ""} {
		for _, rq := range []struct{ method, path, body string }{
			{"GET", "/", ""},
			{"GET", "/console/api/session", ""},
			{"GET", "/console/api/keys", ""},
			{"GET", "/console/api/events", ""},
			{"GET", "/console/api/queue?scope=pm:up/m", ""},
			{"POST", "/console/api/keys", `{"name":"evil"}`},
			{"POST", "/console/api/limit", `{"scope":"pm:up/m","limit":0}`},
		} {
			hdr := map[string]string{"Host": host, "Content-Type": "application/json", csrfHeader: csrf, "Origin": "http://" + host}
			w := b.doCtx(ended, rq.method, rq.path, "127.0.0.1:5000", rq.body, hdr)
			var e struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal(w.Body.Bytes(), &e); w.Code != 403 || err != nil || e.Error.Code != "forbidden" || !strings.Contains(e.Error.Message, "DNS rebinding") {
				t.Errorf("%s %s for Host %q: %d %s; want 403 naming DNS rebinding", rq.method, rq.path, host, w.Code, w.Body)
			}
		}
	}
	if ks, _ := b.store.KeyList(t.Context()); len(ks) != 0 {
		t.Errorf("keys %v were created", ks)
	}
	if v := scopeView(t, b, "pm:up/m"); v.Limit != 2 || v.LimitSet {
		t.Errorf("the limit was changed: %+v", v)
	}
	for _, host := range []string{"127.0.0.1:8080", "localhost:8080", "[::1]:8080", "weir.localhost:8080", "weir.lan:8080"} {
		if w := b.do("GET", "/", "127.0.0.1:5000", "", map[string]string{"Host": host}); w.Code != 200 || !strings.Contains(w.Body.String(), `name="weir-csrf"`) {
			t.Errorf("GET / for Host %s: %d; want the page", host, w.Code)
		}
		hdr := map[string]string{"Host": host, "Content-Type": "application/json", csrfHeader: csrf, "Origin": "http://" + host}
		if w := b.do("POST", "/console/api/drain", "127.0.0.1:5000", `{"platform_model":"up/m","drained":false}`, hdr); w.Code != 200 {
			t.Errorf("an action for Host %s: %d %s", host, w.Code, w.Body)
		}
	}
	withToken := setup(t, Config{AdminToken: adminToken})
	bearer := map[string]string{"Host": "evil.example:8080", "Authorization": "Bearer " + adminToken}
	if w := withToken.do("GET", "/console/api/keys", "127.0.0.1:5000", "", bearer); w.Code != 200 {
		t.Errorf("the admin token, Host evil.example: %d %s", w.Code, w.Body)
	}
}

func scopeView(t *testing.T, b *testBundle, name string) gateway.ScopeView {
	t.Helper()
	for _, v := range b.gw.Scopes(t.Context()) {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no scope %s", name)
	return gateway.ScopeView{}
}

func createKey(t *testing.T, b *testBundle) (id, secret string) {
	t.Helper()
	w := b.do("POST", "/console/api/keys", "10.0.0.1:1", `{"name":"k"}`, map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"})
	if w.Code != http.StatusCreated {
		t.Fatalf("create key: %d %s", w.Code, w.Body)
	}
	var v struct{ ID, Secret string }
	_ = json.Unmarshal(w.Body.Bytes(), &v)
	return v.ID, v.Secret
}

func csrfFor(t *testing.T, b *testBundle, cookie *http.Cookie) string {
	t.Helper()
	hdr := map[string]string{}
	remote := "127.0.0.1:1"
	if cookie != nil {
		hdr["Cookie"] = cookie.String()
	}
	w := b.do("GET", "/console/api/session", remote, "", hdr)
	var v struct{ CSRF string }
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil || v.CSRF == "" {
		t.Fatalf("session: %d %s", w.Code, w.Body)
	}
	return v.CSRF
}

func TestLoginCookie(t *testing.T) {
	t.Parallel()
	// Sampled hourly: the 13 hours the clock moves below take 13
	// snapshots, not one a second.
	b := setup(t, Config{AdminToken: adminToken, Interval: time.Hour, Window: 24 * time.Hour})
	c := b.login(t)
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.Path != "/" || c.MaxAge <= 0 || len(c.Value) < 40 {
		t.Errorf("session cookie %+v; want HttpOnly, SameSite=Strict, not Secure over http, a long random value", c)
	}
	// Over TLS the cookie is Secure.
	r := httptest.NewRequest("POST", "/console/login", strings.NewReader("token="+adminToken))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.RemoteAddr = "10.0.0.8:1"
	r.TLS = &tls.ConnectionState{}
	w := httptest.NewRecorder()
	b.handler.ServeHTTP(w, r)
	if cs := w.Result().Cookies(); len(cs) != 1 || !cs[0].Secure {
		t.Errorf("over TLS: cookies %v; want one Secure", cs)
	}
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	if w := b.do("POST", "/console/login", "10.0.0.7:1", "token=wrong", form); w.Code != 401 || len(w.Result().Cookies()) != 0 {
		t.Errorf("wrong token: %d, cookies %v", w.Code, w.Result().Cookies())
	}
	cross := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "cross-site"}
	if w := b.do("POST", "/console/login", "10.0.0.7:1", "token="+adminToken, cross); w.Code != 403 {
		t.Errorf("cross-site login: %d", w.Code)
	}
	// A session expires.
	b.clock.Advance(13 * time.Hour)
	if w := b.do("GET", "/console/api/session", "10.0.0.1:1", "", map[string]string{"Cookie": c.String()}); w.Code != 401 {
		t.Errorf("an expired session: %d", w.Code)
	}
}

// TestLoginBehindTLSProxy: behind a proxy that ends TLS the gateway sees
// plain http; with an https public URL the session cookie is Secure all
// the same, and the page's https Origin is its own.
func TestLoginBehindTLSProxy(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{AdminToken: adminToken, PublicURL: "https://Weir.Example.com:443/"})
	hdr := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Host": "weir.example.com",
		"Sec-Fetch-Site": "same-origin", "Origin": "https://weir.example.com"}
	w := b.do("POST", "/console/login", "127.0.0.1:40000", "token="+adminToken, hdr)
	if cs := w.Result().Cookies(); w.Code != http.StatusSeeOther || len(cs) != 1 || !cs[0].Secure {
		t.Fatalf("login behind an https proxy: %d, cookies %v; want 303 and one Secure cookie", w.Code, cs)
	}
	hdr["Origin"] = "https://evil.example"
	if w := b.do("POST", "/console/login", "127.0.0.1:40000", "token="+adminToken, hdr); w.Code != 403 {
		t.Errorf("another origin: %d; want 403", w.Code)
	}
	plain := setup(t, Config{AdminToken: adminToken, PublicURL: "http://weir.internal:8080"})
	if c := plain.login(t); c.Secure {
		t.Errorf("an http public URL: the cookie is Secure")
	}
}

// postLogin posts a login from remote in the background; its answer's
// status comes on the channel.
func (b *testBundle) postLogin(remote, token string) <-chan int {
	out := make(chan int, 1)
	go func() {
		w := b.do("POST", "/console/login", remote, "token="+token, map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		out <- w.Code
	}()
	return out
}

// holds makes b's login guard report each failure it holds on the
// returned channel.
func (b *testBundle) holds() <-chan struct{} {
	ch := make(chan struct{}, 10_000)
	b.console.logins.onHold = func() { ch <- struct{}{} }
	return ch
}

// TestLoginFailuresNeverLockOutTheToken: however many wrong tokens come,
// from however many addresses, the right token gets in at once, from a
// new address and from one that has been guessing.
func TestLoginFailuresNeverLockOutTheToken(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{AdminToken: adminToken})
	held := b.holds()
	var pending []<-chan int
	heldN := 0
	for i := range 12 {
		for range 20 {
			ch := b.postLogin(fmt.Sprintf("10.0.1.%d:1000", i), "wrong")
			select {
			case code := <-ch:
				if code != 401 {
					t.Fatalf("a wrong token: %d; want 401", code)
				}
			case <-held:
				heldN++
				pending = append(pending, ch)
			}
		}
	}
	if heldN == 0 {
		t.Fatal("240 failures from 12 addresses: none was slowed")
	}
	for _, remote := range []string{"10.0.2.1:1000", "10.0.1.3:1000"} {
		if code := <-b.postLogin(remote, adminToken); code != http.StatusSeeOther {
			t.Fatalf("the right token from %s after 240 failures: %d; want 303", remote, code)
		}
	}
	// The slowed failures are answered, 401, within the longest wait.
	b.clock.Advance(maxFailureWait)
	for _, ch := range pending {
		if code := <-ch; code != 401 {
			t.Fatalf("a slowed wrong token: %d; want 401", code)
		}
	}
}

// TestLoginFailuresAreSlowed: an address's first failures are answered
// at once, then each waits longer; parallel ones wait in turn.
func TestLoginFailuresAreSlowed(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{AdminToken: adminToken})
	held := b.holds()
	const remote = "10.0.3.1:1000"
	for i := range freeFailures {
		if code := <-b.postLogin(remote, "wrong"); code != 401 {
			t.Fatalf("failure %d: %d", i+1, code)
		}
	}
	sixth := b.postLogin(remote, "wrong")
	<-held
	b.clock.Advance(failureBackoff - time.Millisecond)
	select {
	case code := <-sixth:
		t.Fatalf("the sixth failure was answered (%d) before its second", code)
	default:
	}
	b.clock.Advance(time.Millisecond)
	if code := <-sixth; code != 401 {
		t.Fatalf("the sixth failure: %d", code)
	}
	// Two at once: the 7th waits 2 s, the 8th 4 s.
	seventh := b.postLogin(remote, "wrong")
	<-held
	eighth := b.postLogin(remote, "wrong")
	<-held
	b.clock.Advance(2 * failureBackoff)
	if code := <-seventh; code != 401 {
		t.Fatalf("the seventh failure: %d", code)
	}
	select {
	case code := <-eighth:
		t.Fatalf("the eighth failure was answered (%d) with the seventh", code)
	default:
	}
	b.clock.Advance(2 * failureBackoff)
	if code := <-eighth; code != 401 {
		t.Fatalf("the eighth failure: %d", code)
	}
	// The right token ends the address's backoff.
	if code := <-b.postLogin(remote, adminToken); code != http.StatusSeeOther {
		t.Fatalf("the right token: %d", code)
	}
	if code := <-b.postLogin(remote, "wrong"); code != 401 {
		t.Fatalf("a failure after a login: %d; want it answered at once", code)
	}
}

func TestActionsRefuseCrossSiteRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{AdminToken: adminToken})
	cookie := b.login(t)
	csrf := csrfFor(t, b, cookie)
	body := `{"platform_model":"up/m","drained":true}`
	base := func() map[string]string {
		return map[string]string{"Cookie": cookie.String(), "Content-Type": "application/json", csrfHeader: csrf, "Sec-Fetch-Site": "same-origin", "Origin": "http://" + testHost}
	}
	for _, c := range []struct {
		name   string
		change func(map[string]string)
		want   int
	}{
		{"no CSRF token", func(h map[string]string) { delete(h, csrfHeader) }, 403},
		{"a wrong CSRF token", func(h map[string]string) { h[csrfHeader] = strings.Repeat("0", len(csrf)) }, 403},
		{"cross-site", func(h map[string]string) { h["Sec-Fetch-Site"] = "cross-site" }, 403},
		{"another origin", func(h map[string]string) { h["Origin"] = "http://evil.example" }, 403},
		{"a form's content type", func(h map[string]string) { h["Content-Type"] = "text/plain" }, 400},
		{"the console's own page", func(map[string]string) {}, 200},
	} {
		h := base()
		c.change(h)
		if w := b.do("POST", "/console/api/drain", "10.0.0.1:1", body, h); w.Code != c.want {
			t.Errorf("%s: %d; want %d: %s", c.name, w.Code, c.want, w.Body)
		}
	}
	// A bearer caller is no browser riding a cookie: no CSRF token needed.
	bearer := map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"}
	if w := b.do("POST", "/console/api/drain", "10.0.0.1:1", `{"platform_model":"up/m","drained":false}`, bearer); w.Code != 200 {
		t.Errorf("bearer: %d %s", w.Code, w.Body)
	}
	// Bad input gets a clear 4xx in the API's shape.
	for _, bad := range []struct{ path, body string }{
		{"/console/api/drain", `{"platform_model":"nope","drained":true}`},
		{"/console/api/drain", `{"platform_model":"up/m"}`},
		{"/console/api/limit", `{"scope":"pm:up/m","limit":-3}`},
		{"/console/api/limit", `not json`},
		{"/console/api/waiters/cancel", `{"id":"nobody"}`},
		{"/console/api/keys/key_none/revoke", `{}`},
	} {
		w := b.do("POST", bad.path, "10.0.0.1:1", bad.body, bearer)
		if w.Code < 400 || w.Code >= 500 || !strings.Contains(w.Body.String(), `"code"`) {
			t.Errorf("POST %s %s: %d %s", bad.path, bad.body, w.Code, w.Body)
		}
	}
}

// sseEvent is one event read from a stream.
type sseEvent struct {
	id, event, data string
}

// readEvents reads n events from a stream.
func readEvents(t *testing.T, sc *bufio.Scanner, n int) []sseEvent {
	t.Helper()
	var out []sseEvent
	var e sseEvent
	for len(out) < n && sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if e.event != "" {
				out = append(out, e)
			}
			e = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			e.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			e.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			e.data = line[6:]
		}
	}
	if len(out) < n {
		t.Fatalf("the stream ended after %d events: %v", len(out), sc.Err())
	}
	return out
}

func TestStreamCatchesUpAfterReconnect(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{AdminToken: adminToken})
	srv := httptest.NewServer(b.handler)
	t.Cleanup(srv.Close)
	for range 4 {
		b.clock.Advance(time.Second) // snapshots 2..5
	}
	open := func(lastID string) (*bufio.Scanner, func()) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/console/api/events", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("events: %s %s", resp.Status, resp.Header.Get("Content-Type"))
		}
		return bufio.NewScanner(resp.Body), func() { cancel(); resp.Body.Close() }
	}
	points := func(e sseEvent) []uint64 {
		var v struct{ Points []Point }
		if err := json.Unmarshal([]byte(e.data), &v); err != nil {
			t.Fatal(err)
		}
		var seqs []uint64
		for _, p := range v.Points {
			seqs = append(seqs, p.Seq)
		}
		return seqs
	}

	// A new page gets the whole history, then the newest snapshot.
	sc, closeIt := open("")
	ev := readEvents(t, sc, 2)
	if ev[0].event != "history" || fmt.Sprint(points(ev[0])) != "[1 2 3 4 5]" || ev[1].event != "snapshot" || ev[1].id != "5" {
		t.Fatalf("first events: %+v", ev)
	}
	var snap Snapshot
	if err := json.Unmarshal([]byte(ev[1].data), &snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.Models) != 1 || snap.Models[0].Name != "m" || snap.Models[0].Limit != 2 || snap.Point.Seq != 5 {
		t.Fatalf("snapshot %+v", snap)
	}
	b.clock.Advance(time.Second)
	if ev := readEvents(t, sc, 1); ev[0].id != "6" {
		t.Fatalf("the next snapshot: %+v", ev)
	}
	closeIt()

	// Reconnecting after 6 while 7 and 8 went by: the points missed, then
	// the newest snapshot.
	b.clock.Advance(time.Second)
	b.clock.Advance(time.Second)
	sc, closeIt = open("6")
	defer closeIt()
	ev = readEvents(t, sc, 2)
	if ev[0].event != "history" || fmt.Sprint(points(ev[0])) != "[7 8]" || ev[1].id != "8" {
		t.Fatalf("after reconnecting: %+v", ev)
	}
}

// TestStreamsBounded: past MaxClients live streams, a page is told to
// come back (429 rate_limited with Retry-After), and a stream closed
// frees its place.
func TestStreamsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{AdminToken: adminToken, MaxClients: 1})
	srv := httptest.NewServer(b.handler)
	t.Cleanup(srv.Close)
	open := func() *http.Response {
		req, _ := http.NewRequest("GET", srv.URL+"/console/api/events", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	first := open()
	readEvents(t, bufio.NewScanner(first.Body), 1) // it is counted once it streams
	second := open()
	body, _ := io.ReadAll(second.Body)
	second.Body.Close()
	var e struct{ Error struct{ Code string } }
	_ = json.Unmarshal(body, &e)
	if second.StatusCode != http.StatusTooManyRequests || e.Error.Code != "rate_limited" || second.Header.Get("Retry-After") == "" {
		t.Fatalf("a second stream: %s %s (Retry-After %q); want 429 rate_limited", second.Status, body, second.Header.Get("Retry-After"))
	}
	first.Body.Close()
	for {
		resp := open()
		ok := resp.StatusCode == http.StatusOK
		resp.Body.Close()
		if ok {
			return
		}
		// The server notices the first page gone when its next write
		// fails: the next snapshot.
		b.clock.Advance(time.Second)
	}
}

func TestOfferKeepsOnlyTheNewestFrame(t *testing.T) {
	t.Parallel()
	cl := &client{ch: make(chan frame, 1)}
	for i := range uint64(5) {
		offer(cl, frame{seq: i + 1}) // never blocks, whoever reads
	}
	if f := <-cl.ch; f.seq != 5 {
		t.Fatalf("a slow client got frame %d; want the newest, 5", f.seq)
	}
}

func TestRingIsBounded(t *testing.T) {
	t.Parallel()
	r := newRing(3)
	for i := range uint64(5) {
		bins := new([waitBins]uint32)
		bins[waitBin(time.Duration(i+1)*100*time.Millisecond)] = 10
		r.push(Point{Seq: i + 1, Models: map[string]ModelPoint{"m": {QueuedAdmitted: 10}}, bins: map[string]*[waitBins]uint32{"m": bins}})
	}
	if got := r.since(0); len(got) != 3 || got[0].Seq != 3 || got[2].Seq != 5 {
		t.Fatalf("since(0) = %v", got)
	}
	if got := r.since(4); len(got) != 1 || got[0].Seq != 5 {
		t.Fatalf("since(4) = %v", got)
	}
	p50, p99, queued := r.window("m")
	// The window holds 300, 400 and 500 ms; the evicted 100 and 200 ms
	// no longer count.
	if queued != 30 || p50 < 400 || p50 > 400*1.42 || p99 < 500 || p99 > 500*1.42 {
		t.Fatalf("window: p50 %v p99 %v queued %d", p50, p99, queued)
	}
}

func TestRecorderCountsOnTheRequestPath(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Loopback: true})
	rec := b.console.deps.Recorder
	rec.ObserveQueueWait("m", 0)
	rec.ObserveQueueWait("m", 2*time.Second)
	rec.Usage(weir.Usage{KeyID: "key_1", Status: 200, PromptTokens: 3, CompletionTokens: 4, At: b.clock.Now()})
	rec.Usage(weir.Usage{KeyID: "key_1", Status: 503, At: b.clock.Now()})
	b.clock.Advance(time.Second)
	b.console.mu.Lock()
	pt, _ := b.console.ring.last()
	b.console.mu.Unlock()
	if mp := pt.Models["m"]; mp.Admitted != 2 || mp.QueuedAdmitted != 1 || mp.P99 < 2000 || mp.P50 != 0 {
		t.Fatalf("point %+v", mp)
	}
	if u := rec.KeyUsage("key_1"); u.Requests != 2 || u.Failed != 1 || u.Tokens != 7 || u.Last.IsZero() {
		t.Fatalf("usage %+v", u)
	}
	b.clock.Advance(time.Second)
	b.console.mu.Lock()
	pt, _ = b.console.ring.last()
	b.console.mu.Unlock()
	if mp := pt.Models["m"]; mp.Admitted != 0 {
		t.Fatalf("the next second still counts %d", mp.Admitted)
	}
}

// The queue view answers the engine's order and refuses bad input.
func TestQueueView(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Loopback: true})
	scope := weir.PlatformModelScope("up/m")
	cand := []admission.Candidate{{Needs: []admission.Need{{Scope: scope, Amount: 1}}}}
	for i := range 2 {
		if _, err := b.engine.TryAcquire(t.Context(), admission.Request{ID: fmt.Sprint("held", i), Candidates: cand}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"req_a/0", "req_b/0"} {
		if err := b.engine.Enqueue(t.Context(), admission.Request{ID: id, FairnessKey: "key_1", Candidates: cand, Deadline: b.clock.Now().Add(time.Minute)}, func(admission.Lease, error) {}); err != nil {
			t.Fatal(err)
		}
	}
	w := b.do("GET", "/console/api/queue?scope="+url.QueryEscape(scope), "127.0.0.1:1", "", nil)
	var q QueueAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &q); err != nil || w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if q.Queued != 2 || len(q.Waiters) != 2 || q.Waiters[0].ID != "req_a/0" || q.Waiters[1].Position != 2 || q.Waiters[0].Tenant != "key_1" ||
		q.Waiters[0].DeadlineMs == nil || *q.Waiters[0].DeadlineMs != 60000 || q.Held != 2 || len(q.Leases) != 2 {
		t.Fatalf("queue %+v", q)
	}
	for _, path := range []string{"/console/api/queue", "/console/api/queue?scope=pm:nope"} {
		if w := b.do("GET", path, "127.0.0.1:1", "", nil); w.Code != 400 && w.Code != 404 {
			t.Errorf("GET %s: %d", path, w.Code)
		}
	}
}

// snapshot takes the next snapshot (a second on) and decodes it.
func (b *testBundle) snapshot(t *testing.T) Snapshot {
	t.Helper()
	b.clock.Advance(time.Second)
	b.console.mu.Lock()
	data := b.console.frame
	b.console.mu.Unlock()
	var s Snapshot
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestOverviewCountsEachScopeAndWaiterOnce: an edge node's provider
// serves chat and embeddings, and only chat requests come, each able to
// run on chat's platform model or on the node. The overview shows them
// under chat and the node's shared capacity once, nothing under
// embeddings, and a total of as many as are waiting.
func TestOverviewCountsEachScopeAndWaiterOnce(t *testing.T) {
	t.Parallel()
	node := weir.NodeScope("n1", "gpu")
	b := setupWith(t, Config{Loopback: true}, weir.Catalog{
		Platforms: []weir.Platform{{Name: "up", Kind: "openai", BaseURL: "http://127.0.0.1:1/v1"}},
		PlatformModels: []weir.PlatformModel{
			{Name: "up/chat", Platform: "up", Upstream: "x", Limits: weir.Limits{Concurrency: 1}},
			{Name: "up/emb", Platform: "up", Upstream: "y", Limits: weir.Limits{Concurrency: 8}},
		},
		Models: []weir.Model{
			{Name: "chat", Kind: weir.KindChat, Candidates: []weir.Candidate{{PlatformModel: "up/chat"}}},
			{Name: "embeddings", Kind: weir.KindEmbeddings, Candidates: []weir.Candidate{{PlatformModel: "up/emb"}}},
		},
	}, []weir.NodeView{{ID: "n1", Name: "gpu-box", Connected: true, Providers: []weir.ProviderView{{ID: "gpu", Models: []string{"chat", "embeddings"}}}}})
	ctx := t.Context()
	for _, sc := range []struct {
		name  string
		limit int64
	}{{node, 4}, {weir.KeyScope("key_a"), 0}, {weir.KeyScope("key_b"), 0}, {weir.GroupScope("default"), 0}} {
		if err := b.engine.SetScope(ctx, sc.name, admission.ScopeConfig{Limit: sc.limit}); err != nil {
			t.Fatal(err)
		}
	}
	chatPM := weir.PlatformModelScope("up/chat")
	cands := func(key string) []admission.Candidate {
		tenant := []admission.Need{{Scope: weir.KeyScope(key), Amount: 1}, {Scope: weir.GroupScope("default"), Amount: 1}}
		return []admission.Candidate{
			{Needs: append(slices.Clone(tenant), admission.Need{Scope: chatPM, Amount: 1})},
			{Needs: append(slices.Clone(tenant), admission.Need{Scope: node, Amount: 1})},
		}
	}
	// Five admitted (the platform model's one, the node's four), then
	// seven waiting on both.
	for i := range 12 {
		key := "key_a"
		if i%3 == 0 {
			key = "key_b"
		}
		if err := b.engine.Enqueue(ctx, admission.Request{ID: fmt.Sprintf("req_%d/0", i), FairnessKey: key, Candidates: cands(key)},
			func(admission.Lease, error) {}); err != nil {
			t.Fatal(err)
		}
	}
	s := b.snapshot(t)
	rows := map[string]ModelRow{}
	for _, m := range s.Models {
		rows[m.Name] = m
	}
	if m := rows["embeddings"]; m.Queued != 0 || m.InFlight != 0 || m.Limit != 8 || !slices.Equal(m.Shares, []string{node}) {
		t.Errorf("embeddings, which nobody asked for: %+v; want nothing queued or in flight, of its own 8, sharing %s", m, node)
	}
	if m := rows["chat"]; m.Queued != 7 || m.InFlight != 1 || m.Limit != 1 || !slices.Equal(m.Scopes, []string{chatPM}) || !slices.Equal(m.Shares, []string{node}) {
		t.Errorf("chat: %+v; want 7 queued, 1/1 in flight on %s, sharing %s", m, chatPM, node)
	}
	if len(s.Shared) != 1 || s.Shared[0].Scope != node || !slices.Equal(s.Shared[0].Models, []string{"chat", "embeddings"}) ||
		s.Shared[0].InFlight != 4 || s.Shared[0].Limit != 4 || s.Shared[0].Queued != 7 {
		t.Errorf("shared %+v; want %s, serving chat and embeddings, 4/4 in flight, 7 queued, once", s.Shared, node)
	}
	if s.Requests.Waiting != 7 || s.Requests.InFlight != 5 {
		t.Errorf("requests %+v; want the 7 waiting and 5 in flight, each once", s.Requests)
	}
}

// TestQueueViewPagesAndNamesKeys: a long queue comes a page at a time,
// each waiter with its key's name beside the id.
func TestQueueViewPagesAndNamesKeys(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Loopback: true, AdminToken: adminToken})
	keyID, _ := createKey(t, b)
	scope := weir.PlatformModelScope("up/m")
	cand := []admission.Candidate{{Needs: []admission.Need{{Scope: scope, Amount: 1}}}}
	for i := range 252 {
		if err := b.engine.Enqueue(t.Context(), admission.Request{ID: fmt.Sprintf("req_%03d/0", i), FairnessKey: keyID, Candidates: cand},
			func(admission.Lease, error) {}); err != nil {
			t.Fatal(err)
		}
	}
	bearer := map[string]string{"Authorization": "Bearer " + adminToken}
	get := func(query string) QueueAnswer {
		t.Helper()
		w := b.do("GET", "/console/api/queue?scope="+url.QueryEscape(scope)+query, "10.0.0.1:1", "", bearer)
		var q QueueAnswer
		if err := json.Unmarshal(w.Body.Bytes(), &q); err != nil || w.Code != 200 {
			t.Fatalf("%s: %d %s", query, w.Code, w.Body)
		}
		return q
	}
	q := get("")
	if q.Queued != 250 || q.Offset != 0 || q.Limit != 100 || len(q.Waiters) != 100 || q.Waiters[0].Position != 1 || q.Waiters[99].Position != 100 ||
		q.Waiters[0].ID != "req_002/0" || q.Waiters[0].Tenant != keyID || q.Waiters[0].TenantName != "k" || q.Held != 2 {
		t.Fatalf("the first page: queued %d, offset %d, limit %d, %d waiters, first %+v, held %d", q.Queued, q.Offset, q.Limit, len(q.Waiters), q.Waiters[0], q.Held)
	}
	q = get("&offset=200&limit=100")
	if len(q.Waiters) != 50 || q.Waiters[0].Position != 201 || q.Waiters[49].Position != 250 || q.Waiters[49].ID != "req_251/0" {
		t.Fatalf("the last page: %d waiters, from %+v", len(q.Waiters), q.Waiters)
	}
	if q := get("&offset=300"); len(q.Waiters) != 0 || q.Queued != 250 {
		t.Fatalf("past the end: %d waiters of %d", len(q.Waiters), q.Queued)
	}
	for _, bad := range []string{"&limit=0", "&limit=501", "&limit=x", "&offset=-1", "&offset=100000"} {
		w := b.do("GET", "/console/api/queue?scope="+url.QueryEscape(scope)+bad, "10.0.0.1:1", "", bearer)
		if w.Code != 400 || !strings.Contains(w.Body.String(), `"code":"invalid_request"`) {
			t.Errorf("%s: %d %s; want 400", bad, w.Code, w.Body)
		}
	}
}

// TestCreateKeyRefusesAnUnknownGroup: the console's key creation refuses
// a group the catalog has not, with invalid_request naming group, and
// stores nothing; the default group (named or not) is always there.
func TestCreateKeyRefusesAnUnknownGroup(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{AdminToken: adminToken})
	bearer := map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"}
	w := b.do("POST", "/console/api/keys", "10.0.0.1:1", `{"name":"k","group":"nosuchgroup"}`, bearer)
	var e struct {
		Error struct {
			Code, Message string
			Param         *string
		}
	}
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || w.Code != http.StatusBadRequest || e.Error.Code != "invalid_request" ||
		e.Error.Param == nil || *e.Error.Param != "group" || !strings.Contains(e.Error.Message, `no group "nosuchgroup"`) {
		t.Fatalf("create with an unknown group: %d %s; want 400 invalid_request naming group", w.Code, w.Body)
	}
	if ks, err := b.store.KeyList(t.Context()); err != nil || len(ks) != 0 {
		t.Fatalf("keys stored after the refusal: %+v, %v", ks, err)
	}
	for _, body := range []string{`{"name":"k"}`, `{"name":"k","group":"default"}`} {
		if w := b.do("POST", "/console/api/keys", "10.0.0.1:1", body, bearer); w.Code != http.StatusCreated {
			t.Errorf("create %s: %d %s", body, w.Code, w.Body)
		}
	}
}

// TestWriteErrShowsNoInternals: an action's failure that is neither the
// gateway's nor a missing task is a 500 in the API's shape that shows
// nothing of the error's text; a gateway error keeps its category's code.
func TestWriteErrShowsNoInternals(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Loopback: true})
	w := httptest.NewRecorder()
	b.console.writeErr(w, fmt.Errorf("update scope: dial tcp 10.0.0.7:5432: password=hunter2"))
	if w.Code != http.StatusInternalServerError || strings.Contains(w.Body.String(), "hunter2") || strings.Contains(w.Body.String(), "10.0.0.7") ||
		!strings.Contains(w.Body.String(), `"code":"internal_error"`) {
		t.Errorf("a foreign error: %d %s; want 500 internal_error without its text", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	b.console.writeErr(w, fmt.Errorf("drain: %w", &gateway.Error{Category: gateway.ErrRateLimited, Message: "later", RetryAfter: 2 * time.Second}))
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "2" || !strings.Contains(w.Body.String(), `"code":"rate_limited"`) {
		t.Errorf("a gateway error: %d %v %s; want 429 rate_limited with Retry-After 2", w.Code, w.Header(), w.Body)
	}
}

// A window shorter than the interval keeps one point: the charts' ring
// is never empty (a ring of none would fail its first push).
func TestWindowAtLeastOneInterval(t *testing.T) {
	cfg := Config{Interval: time.Second, Window: time.Millisecond}
	cfg.defaults()
	n := int(cfg.Window / cfg.Interval)
	if n != 1 {
		t.Fatalf("window %v over interval %v keeps %d points, want 1", cfg.Window, cfg.Interval, n)
	}
	r := newRing(n)
	r.push(Point{})
	r.push(Point{})
}
