package console

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/adminauth"
	"github.com/weir-gateway/weir/apierror"
	"github.com/weir-gateway/weir/gateway"
)

//go:embed assets
var assets embed.FS

var pages = template.Must(template.ParseFS(assets, "assets/index.html", "assets/login.html"))

// Handler serves the console: GET / (the page, or the login form), its
// assets under /console/assets/, the login under /console/login and the
// API the page uses under /console/api/. Mount it at "GET /{$}" and
// "/console/".
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	files := http.StripPrefix("/console/assets/", http.FileServerFS(static))
	mux.Handle("GET /console/assets/", headers(files))
	mux.HandleFunc("GET /{$}", c.index)
	mux.HandleFunc("POST /console/login", c.login)
	mux.HandleFunc("POST /console/logout", c.act(c.logout))
	mux.HandleFunc("GET /console/api/session", c.read(c.session))
	mux.HandleFunc("GET /console/api/events", c.read(c.events))
	mux.HandleFunc("GET /console/api/queue", c.read(c.queue))
	mux.HandleFunc("GET /console/api/tasks", c.read(c.listTasks))
	mux.HandleFunc("GET /console/api/tasks/{id}", c.read(c.getTask))
	mux.HandleFunc("POST /console/api/tasks/{id}/cancel", c.act(c.cancelTask))
	mux.HandleFunc("GET /console/api/keys", c.read(c.listKeys))
	mux.HandleFunc("POST /console/api/keys", c.act(c.createKey))
	mux.HandleFunc("POST /console/api/keys/{id}/revoke", c.act(c.revokeKey))
	mux.HandleFunc("GET /console/api/spend", c.read(c.spend))
	mux.HandleFunc("POST /console/api/waiters/cancel", c.act(c.cancelWaiter))
	mux.HandleFunc("POST /console/api/drain", c.act(c.drain))
	mux.HandleFunc("POST /console/api/limit", c.act(c.setLimit))
	mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, weir.CodeNotFound, "", fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
	})
	return headers(c.hostGuard(mux))
}

// hostGuard refuses, before anything is read or changed, a request that
// names a host other than a loopback one while loopback alone vouches
// for clients (see hostRefused).
func (c *Console) hostGuard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.hostRefused(r) {
			writeError(w, weir.CodeForbidden, "", adminauth.HostRefusal(r.Host))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// headers sets what every console answer carries: no framing by other
// sites, no sniffing, no referrer to other sites, and a policy that lets the page load
// nothing but its own assets.
func headers(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "same-origin") // no-referrer would make a form post's Origin "null"
		hd.Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// read guards a view: the caller must get in (see access).
func (c *Console) read(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c.refuse(w, r) == denied {
			return
		}
		if err := h(w, r); err != nil {
			c.writeErr(w, err)
		}
	}
}

// act guards an action: the caller must get in, and a browser's request
// must come from the console's own page with its CSRF token.
func (c *Console) act(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a := c.refuse(w, r)
		if a == denied {
			return
		}
		if !c.csrfOK(r, a) {
			writeError(w, weir.CodeForbidden, "", "this action must come from the console's own page (cross-site request refused)")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := h(w, r); err != nil {
			c.writeErr(w, err)
		}
	}
}

// refuse answers a request that does not get in, and says how one does.
func (c *Console) refuse(w http.ResponseWriter, r *http.Request) access {
	a := c.access(r)
	switch {
	case a != denied:
	case c.cfg.AdminToken != "":
		writeError(w, weir.CodeUnauthorized, "", "log in with the admin token")
	case !c.cfg.Loopback:
		writeError(w, weir.CodeForbidden, "", offMessage)
	default:
		writeError(w, weir.CodeForbidden, "", "the console answers loopback clients only unless an admin token is set")
	}
	return a
}

const offMessage = "the console is off: set server.admin_token (then log in with it), or server.admin_loopback: true to let loopback clients in without one"

// index serves the console's page, or the login form.
func (c *Console) index(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	switch c.access(r) {
	case denied:
		data := map[string]any{"Error": "", "Off": ""}
		status := http.StatusUnauthorized
		if c.cfg.AdminToken == "" {
			status = http.StatusForbidden
			data["Off"] = offMessage
			if c.cfg.Loopback {
				data["Off"] = "the console answers loopback clients only unless an admin token is set"
			}
		}
		w.WriteHeader(status)
		_ = pages.ExecuteTemplate(w, "login.html", data)
	default:
		_ = pages.ExecuteTemplate(w, "index.html", map[string]any{"CSRF": c.csrfToken(r), "Token": c.cfg.AdminToken != ""})
	}
}

// login checks the admin token from the form and starts a session. The
// token is checked first: the right one gets in whatever failed before
// (loginGuard limits only failures, by when their answer goes out).
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	render := func(status int, msg string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(status)
		_ = pages.ExecuteTemplate(w, "login.html", map[string]any{"Error": msg, "Off": ""})
	}
	if c.cfg.AdminToken == "" {
		render(http.StatusForbidden, "no admin token is set: "+offMessage)
		return
	}
	if !c.sameOrigin(r) {
		render(http.StatusForbidden, "cross-site login refused")
		return
	}
	addr := clientIP(r)
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err == nil && c.token.Is(r.PostForm.Get("token")) {
		c.logins.succeeded(addr)
		id, exp, err := c.sessions.create()
		if err != nil {
			render(http.StatusInternalServerError, "could not start a session")
			return
		}
		http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/", Expires: exp, MaxAge: int(c.cfg.SessionTTL.Seconds()),
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.secure(r)})
		c.deps.Metrics.ConsoleLogin("ok")
		c.deps.Logger.Info("console login", "remote", addr)
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	at, n, held := c.logins.failed(addr)
	c.deps.Metrics.ConsoleLogin("failed")
	if n&(n-1) == 0 {
		// The 1st, 2nd, 4th, 8th... failure of an address: a guesser's
		// log lines grow with the log of its guesses.
		c.deps.Logger.Warn("console login refused: not the admin token", "remote", addr, "failures", n)
	}
	if held {
		c.waitUntil(r.Context(), at)
		c.logins.release()
	}
	render(http.StatusUnauthorized, "that is not the admin token")
}

// waitUntil waits until at on the console's clock, or until ctx ends.
func (c *Console) waitUntil(ctx context.Context, at time.Time) {
	done := make(chan struct{})
	t := c.deps.Clock.AfterFunc(at.Sub(c.deps.Clock.Now()), func() { close(done) })
	defer t.Stop()
	if c.logins.onHold != nil {
		c.logins.onHold()
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) error {
	if ck, err := r.Cookie(cookieName); err == nil {
		c.sessions.end(ck.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.secure(r)})
	return writeJSON(w, map[string]bool{"ok": true})
}

func (c *Console) session(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, map[string]any{"csrf": c.csrfToken(r), "token": c.cfg.AdminToken != ""})
}

// events is the live stream (Server-Sent Events). A new stream gets the
// chart history and the newest snapshot at once; one that reconnects
// with Last-Event-ID gets the points it missed. After that a snapshot
// every Interval, each with its point; a client that fell behind gets
// the newest snapshot and the points in between, never a backlog.
func (c *Console) events(w http.ResponseWriter, r *http.Request) error {
	rc := http.NewResponseController(w)
	cl := &client{ch: make(chan frame, 1)}
	c.mu.Lock()
	if len(c.clients) >= c.cfg.MaxClients {
		c.mu.Unlock()
		w.Header().Set("Retry-After", "5")
		writeError(w, weir.CodeRateLimited, "", fmt.Sprintf("the console already streams to %d pages; close one", c.cfg.MaxClients))
		return nil
	}
	c.clients[cl] = struct{}{}
	last, _ := strconv.ParseUint(r.Header.Get("Last-Event-ID"), 10, 64)
	if last == 0 {
		last, _ = strconv.ParseUint(r.URL.Query().Get("since"), 10, 64)
	}
	if last > c.seq {
		last = 0 // another process's ids: start afresh
	}
	history := c.ring.since(last)
	first := frame{seq: c.seq, data: c.frame}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.clients, cl)
		c.mu.Unlock()
	}()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	var buf bytes.Buffer
	write := func() error {
		// A network deadline is on the real clock, whatever Deps.Clock is.
		_ = rc.SetWriteDeadline(time.Now().Add(c.cfg.WriteTimeout))
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
		buf.Reset()
		return rc.Flush()
	}
	buf.WriteString("retry: 2000\n\n")
	if len(history) > 0 {
		writeEvent(&buf, "history", 0, mustJSON(map[string]any{"points": history}))
	}
	if first.data != nil {
		writeEvent(&buf, "snapshot", first.seq, first.data)
		last = first.seq
	}
	if err := write(); err != nil {
		return nil
	}
	for {
		select {
		case <-r.Context().Done():
			return nil
		case f := <-cl.ch:
			if f.seq <= last {
				continue
			}
			if f.seq > last+1 && last > 0 {
				c.mu.Lock()
				missed := c.ring.since(last)
				c.mu.Unlock()
				if n := len(missed); n > 0 && missed[n-1].Seq == f.seq {
					missed = missed[:n-1] // the snapshot carries its own point
				}
				if len(missed) > 0 {
					writeEvent(&buf, "history", 0, mustJSON(map[string]any{"points": missed}))
				}
			}
			writeEvent(&buf, "snapshot", f.seq, f.data)
			last = f.seq
			if err := write(); err != nil {
				return nil // a slow or gone client: dropped; its page reconnects
			}
		}
	}
}

func writeEvent(b *bytes.Buffer, event string, id uint64, data []byte) {
	if id > 0 {
		fmt.Fprintf(b, "id: %d\n", id)
	}
	fmt.Fprintf(b, "event: %s\ndata: ", event)
	b.Write(data) // JSON has no raw newline
	b.WriteString("\n\n")
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte("{}")
	}
	return b
}

// decode reads a JSON body into v; anything else is a 400.
func decode(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return &gateway.Error{Category: gateway.ErrInvalid, Message: "send the body as application/json"}
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return &gateway.Error{Category: gateway.ErrInvalid, Message: "the body is not the JSON this action takes: " + err.Error()}
	}
	return nil
}

func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(v)
}

// writeErr answers err in the API's error shape: a gateway error under
// its category's code, a task or key not found as not_found, anything
// else internal_error, logged and with nothing of its text shown.
func (c *Console) writeErr(w http.ResponseWriter, err error) {
	var ge *gateway.Error
	code, client, ok := gateway.CodeOf(err)
	switch {
	case ok && errors.As(err, &ge):
		apierror.Write(w, &apierror.Answer{Code: code, Client: client, Param: ge.Param, Message: ge.Message, RetryAfter: ge.RetryAfter})
	case errors.Is(err, gateway.ErrTaskNotFound), errors.Is(err, weir.ErrNotFound):
		writeError(w, weir.CodeNotFound, "id", "no such task")
	default:
		c.deps.Logger.Error("console action failed", "error", err)
		writeError(w, weir.CodeInternal, "", "the action failed; the gateway's log says why")
	}
}

// writeError writes OpenAI's error shape, as the rest of the API does.
func writeError(w http.ResponseWriter, code weir.Code, param, msg string) {
	apierror.Write(w, &apierror.Answer{Code: code, Param: param, Message: msg})
}
