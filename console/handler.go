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
	"github.com/weir-gateway/weir/keys"
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
		writeError(w, weir.CodeStoreUnavailable, "", fmt.Sprintf("the console already streams to %d pages; close one", c.cfg.MaxClients))
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

// QueueAnswer is what GET /console/api/queue answers: one page of a
// scope's waiters, in the order they will be admitted.
type QueueAnswer struct {
	Scope string `json:"scope"`
	// Queued counts every waiter; Waiters are those at positions
	// Offset+1 to Offset+Limit.
	Queued  int                `json:"queued"`
	Offset  int                `json:"offset"`
	Limit   int                `json:"limit"`
	Held    int                `json:"held"`
	Waiters []WaiterRow        `json:"waiters"`
	Leases  []LeaseRow         `json:"leases"`
	Stats   *gateway.ScopeView `json:"stats,omitempty"`
}

// WaiterRow is one waiter in QueueAnswer.
type WaiterRow struct {
	ID       string `json:"id"`
	Position int    `json:"position"`
	Priority int32  `json:"priority"`
	// Tenant is its key's id; TenantName the key's name, if it has one.
	Tenant     string `json:"tenant"`
	TenantName string `json:"tenant_name,omitempty"`
	Owner      string `json:"owner"`
	Amount     int64  `json:"amount"`
	AgeMs      int64  `json:"age_ms"`
	// DeadlineMs is how long until it gives up; omitted with no deadline.
	DeadlineMs *int64 `json:"deadline_ms,omitempty"`
	Holder     bool   `json:"holder,omitempty"`
	Task       bool   `json:"task,omitempty"`
}

// LeaseRow is one lease in QueueAnswer.
type LeaseRow struct {
	ID       string `json:"id"`
	WaiterID string `json:"waiter_id"`
	Owner    string `json:"owner"`
	Amount   int64  `json:"amount"`
	AgeMs    *int64 `json:"age_ms,omitempty"`
	// ExpiresMs is how long until it is reaped unless renewed.
	ExpiresMs *int64 `json:"expires_ms,omitempty"`
}

// The queue view's pages: queuePage waiters unless ?limit= says up to
// maxQueuePage, and no further into a queue than maxQueueDepth (the
// engine walks the queue to the page, under its lock). maxQueueLeases
// bounds the leases listed.
const (
	queuePage      = 100
	maxQueuePage   = 500
	maxQueueDepth  = 100_000
	maxQueueLeases = 500
)

func (c *Console) queue(w http.ResponseWriter, r *http.Request) error {
	qs := r.URL.Query()
	name := qs.Get("scope")
	if name == "" {
		return &gateway.Error{Category: gateway.ErrInvalid, Param: "scope", Message: "name a scope: ?scope=pm:up/chat"}
	}
	limit, err := intParam(qs.Get("limit"), "limit", queuePage, 1, maxQueuePage)
	if err != nil {
		return err
	}
	offset, err := intParam(qs.Get("offset"), "offset", 0, 0, maxQueueDepth-limit)
	if err != nil {
		return err
	}
	q, err := c.deps.Gateway.ScopeQueue(r.Context(), name, max(offset+limit, maxQueueLeases))
	if err != nil {
		return err
	}
	now := c.deps.Clock.Now()
	out := QueueAnswer{Scope: q.Scope, Queued: q.Queued, Offset: offset, Limit: limit, Held: q.Held, Waiters: []WaiterRow{}, Leases: []LeaseRow{}}
	for _, v := range c.deps.Gateway.Scopes(r.Context()) {
		if v.Name == name {
			out.Stats = &v
			break
		}
	}
	page := q.Waiters[min(offset, len(q.Waiters)):min(offset+limit, len(q.Waiters))]
	tenants := make([]string, 0, len(page))
	for _, wv := range page {
		tenants = append(tenants, wv.FairnessKey)
	}
	names := c.names.of(r.Context(), tenants)
	for _, wv := range page {
		row := WaiterRow{ID: wv.ID, Position: wv.Position, Priority: wv.Priority, Tenant: wv.FairnessKey, TenantName: names[wv.FairnessKey],
			Owner: wv.Owner.String(), Amount: wv.Amount, AgeMs: now.Sub(wv.Arrived).Milliseconds(), Holder: wv.Holder}
		if wv.Owner.ID == "" {
			row.Owner = ""
		}
		if !wv.Deadline.IsZero() {
			d := wv.Deadline.Sub(now).Milliseconds()
			row.DeadlineMs = &d
		}
		row.Task = c.deps.Tasks != nil && !strings.HasPrefix(wv.ID, "req_")
		out.Waiters = append(out.Waiters, row)
	}
	for _, l := range q.Leases[:min(len(q.Leases), maxQueueLeases)] {
		row := LeaseRow{ID: strconv.FormatUint(uint64(l.ID), 10), WaiterID: l.WaiterID, Owner: l.Owner.String(), Amount: l.Amount}
		if l.Owner.ID == "" {
			row.Owner = ""
		}
		if !l.Admitted.IsZero() {
			d := now.Sub(l.Admitted).Milliseconds()
			row.AgeMs = &d
		}
		if !l.Expires.IsZero() {
			d := l.Expires.Sub(now).Milliseconds()
			row.ExpiresMs = &d
		}
		out.Leases = append(out.Leases, row)
	}
	return writeJSON(w, out)
}

// intParam reads a whole-number query parameter from lo to hi, def when
// absent.
func intParam(v, name string, def, lo, hi int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, &gateway.Error{Category: gateway.ErrInvalid, Param: name, Message: fmt.Sprintf("%s is a whole number from %d to %d", name, lo, hi)}
	}
	return n, nil
}

func (c *Console) cancelWaiter(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		ID string `json:"id"`
	}
	if err := decode(r, &in); err != nil {
		return err
	}
	if in.ID == "" {
		return &gateway.Error{Category: gateway.ErrInvalid, Param: "id", Message: "name the waiter to cancel"}
	}
	// A task's waiter is the task: cancel the task, so that it is
	// recorded as cancelled rather than queued again.
	if c.deps.Tasks != nil {
		if t, err := c.deps.Tasks.Get(r.Context(), in.ID); err == nil {
			t, err = c.deps.Tasks.Cancel(r.Context(), t.ID)
			if err != nil {
				return err
			}
			return writeJSON(w, map[string]any{"ok": true, "task": taskRow(t)})
		}
	}
	if err := c.deps.Operator.CancelWaiter(r.Context(), in.ID); err != nil {
		return err
	}
	return writeJSON(w, map[string]bool{"ok": true})
}

func (c *Console) drain(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		PlatformModel string `json:"platform_model"`
		Drained       *bool  `json:"drained"`
	}
	if err := decode(r, &in); err != nil {
		return err
	}
	if in.PlatformModel == "" || in.Drained == nil {
		return &gateway.Error{Category: gateway.ErrInvalid, Message: `send {"platform_model": NAME, "drained": true|false}`}
	}
	if err := c.deps.Operator.Drain(r.Context(), in.PlatformModel, *in.Drained); err != nil {
		return err
	}
	return writeJSON(w, map[string]any{"ok": true, "survives": "until lifted, through reloads and restarts, on every replica"})
}

func (c *Console) setLimit(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Scope string `json:"scope"`
		Limit *int64 `json:"limit"`
	}
	if err := decode(r, &in); err != nil {
		return err
	}
	if in.Scope == "" || in.Limit == nil {
		return &gateway.Error{Category: gateway.ErrInvalid, Message: `send {"scope": NAME, "limit": N} (0: unlimited)`}
	}
	if err := c.deps.Operator.SetScopeLimit(r.Context(), in.Scope, *in.Limit); err != nil {
		return err
	}
	return writeJSON(w, map[string]any{"ok": true, "survives": "until the next reload (SIGHUP) or restart of any replica, which apply the config's limit"})
}

// TaskRow is a task as the tasks view lists it.
type TaskRow struct {
	ID            string    `json:"id"`
	Kind          string    `json:"kind"`
	Model         string    `json:"model"`
	Status        string    `json:"status"`
	KeyID         string    `json:"key_id"`
	KeyName       string    `json:"key_name,omitempty"`
	Priority      int32     `json:"priority"`
	PlatformModel string    `json:"platform_model,omitempty"`
	Progress      int       `json:"progress"`
	Attempts      int       `json:"attempts"`
	ErrorCode     string    `json:"error_code,omitempty"`
	ErrorMessage  string    `json:"error_message,omitempty"`
	CallbackURL   string    `json:"callback_url,omitempty"`
	CallbackGone  time.Time `json:"callback_gone_at,omitzero"`
	UpstreamID    string    `json:"upstream_id,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	AdmittedAt    time.Time `json:"admitted_at,omitzero"`
	FinishedAt    time.Time `json:"finished_at,omitzero"`
	Deadline      time.Time `json:"deadline,omitzero"`
}

func taskRow(t weir.Task) TaskRow {
	return TaskRow{ID: t.ID, Kind: t.Kind, Model: t.Model, Status: string(t.Status), KeyID: t.KeyID, Priority: t.Priority,
		PlatformModel: t.PlatformModel, Progress: t.Progress, Attempts: t.Attempts, ErrorCode: t.ErrorCode, ErrorMessage: t.ErrorMessage,
		CallbackURL: t.CallbackURL, CallbackGone: t.CallbackGoneAt, UpstreamID: t.UpstreamID, CreatedAt: t.CreatedAt,
		AdmittedAt: t.AdmittedAt, FinishedAt: t.FinishedAt, Deadline: t.Deadline}
}

func (c *Console) listTasks(w http.ResponseWriter, r *http.Request) error {
	if c.deps.Tasks == nil {
		return writeJSON(w, map[string]any{"tasks": []TaskRow{}})
	}
	q := r.URL.Query()
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			return &gateway.Error{Category: gateway.ErrInvalid, Param: "limit", Message: "limit is 1 to 500"}
		}
		limit = n
	}
	f := weir.TaskFilter{Descending: true, Limit: limit}
	if st := q.Get("status"); st != "" {
		for _, s := range strings.Split(st, ",") {
			ts := weir.TaskStatus(s)
			if !ts.Valid() {
				return &gateway.Error{Category: gateway.ErrInvalid, Param: "status", Message: fmt.Sprintf("unknown status %q", s)}
			}
			f.Statuses = append(f.Statuses, ts)
		}
	}
	f.Model = q.Get("model")
	ts, err := c.deps.Tasks.List(r.Context(), f)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(ts))
	for _, t := range ts {
		ids = append(ids, t.KeyID)
	}
	names := c.names.of(r.Context(), ids)
	out := make([]TaskRow, 0, len(ts))
	for _, t := range ts {
		row := taskRow(t)
		row.KeyName = names[t.KeyID]
		out = append(out, row)
	}
	return writeJSON(w, map[string]any{"tasks": out})
}

func (c *Console) getTask(w http.ResponseWriter, r *http.Request) error {
	if c.deps.Tasks == nil {
		return &gateway.Error{Category: gateway.ErrNotFound, Message: "this gateway runs no tasks"}
	}
	t, err := c.deps.Tasks.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	row := taskRow(t)
	row.KeyName = c.names.of(r.Context(), []string{t.KeyID})[t.KeyID]
	out := map[string]any{"task": row, "events": taskEvents(t), "input": json.RawMessage(orNull(t.Input)), "result": json.RawMessage(orNull(t.Result))}
	if p, ok := c.deps.Tasks.Position(r.Context(), t.ID); ok {
		out["position"] = map[string]any{"scope": p.Scope, "ahead": p.Ahead, "queued": p.Queued, "estimated_wait_ms": p.EstimatedWait.Milliseconds()}
	}
	if t.CallbackURL != "" {
		ds, err := c.deps.Tasks.Deliveries(r.Context(), t.ID)
		if err != nil {
			// The task is still worth showing: say what is missing.
			c.deps.Logger.Warn("console: could not list a task's deliveries", "task", t.ID, "error", err)
			out["deliveries_error"] = "could not read the deliveries"
		}
		out["deliveries"] = deliveryRows(ds)
	}
	return writeJSON(w, out)
}

// deliveryRows are a task's callback deliveries as the task view shows
// them: each event, its state, its tries and each failed one.
func deliveryRows(ds []gateway.TaskDelivery) []map[string]any {
	out := make([]map[string]any, 0, len(ds))
	for _, d := range ds {
		errs := make([]map[string]any, 0, len(d.Errors))
		for _, e := range d.Errors {
			errs = append(errs, map[string]any{"attempt": e.Attempt, "at": e.At, "error": e.Error})
		}
		row := map[string]any{"event_id": d.EventID, "type": d.Type, "state": d.State, "attempts": d.Attempts,
			"max_attempts": d.MaxAttempts, "created_at": d.CreatedAt, "errors": errs}
		for k, t := range map[string]time.Time{"attempted_at": d.AttemptedAt, "finalized_at": d.FinalizedAt, "next_at": d.NextAt} {
			if !t.IsZero() {
				row[k] = t
			}
		}
		out = append(out, row)
	}
	return out
}

func orNull(b []byte) []byte {
	if len(b) == 0 || !json.Valid(b) {
		return []byte("null")
	}
	return b
}

// taskEvents is a task's life as its record tells it, oldest first.
func taskEvents(t weir.Task) []map[string]any {
	ev := []map[string]any{{"at": t.CreatedAt, "event": "submitted", "detail": "priority " + strconv.Itoa(int(t.Priority))}}
	if !t.AdmittedAt.IsZero() {
		ev = append(ev, map[string]any{"at": t.AdmittedAt, "event": "admitted", "detail": t.PlatformModel})
	}
	if t.Attempts > 0 {
		ev = append(ev, map[string]any{"event": "retried", "detail": fmt.Sprintf("%d upstream job(s) failed and ran again", t.Attempts)})
	}
	if !t.FinishedAt.IsZero() {
		d := t.ErrorMessage
		if t.ErrorCode != "" {
			d = t.ErrorCode + ": " + d
		}
		ev = append(ev, map[string]any{"at": t.FinishedAt, "event": string(t.Status), "detail": d})
	}
	if t.CallbackURL != "" {
		d := "callback " + t.CallbackURL
		if !t.CallbackGoneAt.IsZero() {
			ev = append(ev, map[string]any{"at": t.CallbackGoneAt, "event": "callback_gone", "detail": d + " answered 410 Gone: no more events"})
		}
	}
	return ev
}

func (c *Console) cancelTask(w http.ResponseWriter, r *http.Request) error {
	if c.deps.Tasks == nil {
		return &gateway.Error{Category: gateway.ErrNotFound, Message: "this gateway runs no tasks"}
	}
	t, err := c.deps.Tasks.Cancel(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	c.deps.Logger.Warn("task cancelled from the console", "task", t.ID)
	return writeJSON(w, map[string]any{"task": taskRow(t)})
}

// KeyRow is a key as the keys view lists it, with its usage over
// usageWindow as the store records it (every replica's), or, if the store
// cannot say, this process's since it started.
type KeyRow struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Prefix    string    `json:"prefix"`
	Group     string    `json:"group"`
	Models    []string  `json:"models,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
	Usage     KeyUsage  `json:"usage"`
}

// usageWindow is how far back the keys view sums usage.
const usageWindow = 24 * time.Hour

func (c *Console) listKeys(w http.ResponseWriter, r *http.Request) error {
	ks, err := c.deps.Keys.KeyList(r.Context())
	if err != nil {
		return fmt.Errorf("list keys: %w", err)
	}
	window := "the last 24 hours, every replica (as recorded: a few seconds behind)"
	recorded := make(map[string]KeyUsage)
	sums, err := c.deps.Keys.UsageByKey(r.Context(), c.deps.Clock.Now().Add(-usageWindow))
	if err != nil {
		c.deps.Logger.Warn("console: could not sum usage by key; showing this process's", "error", err)
		window, recorded = "this process, since it started (the store could not say)", nil
	}
	for _, u := range sums {
		recorded[u.KeyID] = KeyUsage{Requests: uint64(u.Requests), Failed: uint64(u.Failed), Tokens: uint64(u.Tokens), Last: u.Last}
	}
	out := make([]KeyRow, 0, len(ks))
	for _, k := range ks {
		u := recorded[k.ID]
		if recorded == nil {
			u = c.deps.Recorder.KeyUsage(k.ID)
		}
		out = append(out, KeyRow{ID: k.ID, Name: k.Name, Prefix: k.Prefix, Group: k.Group, Models: k.Models,
			CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt, Usage: u})
	}
	return writeJSON(w, map[string]any{"keys": out, "usage_window": window})
}

func (c *Console) createKey(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Name   string   `json:"name"`
		Group  string   `json:"group"`
		Models []string `json:"models"`
	}
	if err := decode(r, &in); err != nil {
		return err
	}
	if len(in.Name) > 200 {
		return &gateway.Error{Category: gateway.ErrInvalid, Param: "name", Message: "a name is at most 200 bytes"}
	}
	k := weir.APIKey{Name: in.Name, Group: in.Group, Models: in.Models}
	if k.Group == "" {
		k.Group = c.cfg.DefaultGroup
	}
	st := c.deps.Gateway.Snapshot()
	if st == nil {
		return &gateway.Error{Category: gateway.ErrUnavailable, Message: "no catalog is applied yet: its groups are not known"}
	}
	var fe *weir.FieldError
	if err := st.CheckKeyGroup(k.Group); errors.As(err, &fe) {
		return &gateway.Error{Category: gateway.ErrInvalid, Param: fe.Path, Message: fe.Msg, Err: err}
	}
	secret, prefix, hash, err := keys.Generate()
	if err != nil {
		return err
	}
	if k.ID, err = keys.NewID("key_"); err != nil {
		return err
	}
	k.Prefix, k.Hash, k.CreatedAt = prefix, hash, c.deps.Clock.Now().UTC()
	if err := c.deps.Keys.KeyCreate(r.Context(), k); err != nil {
		if errors.Is(err, weir.ErrInvalid) {
			return &gateway.Error{Category: gateway.ErrInvalid, Message: err.Error()}
		}
		return fmt.Errorf("create key: %w", err)
	}
	c.deps.Logger.Info("key created from the console", "key", k.ID, "name", k.Name)
	w.WriteHeader(http.StatusCreated)
	return writeJSON(w, map[string]any{"id": k.ID, "name": k.Name, "group": k.Group, "secret": secret})
}

func (c *Console) revokeKey(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, err := c.deps.Keys.KeyByID(r.Context(), id); err != nil {
		if errors.Is(err, weir.ErrNotFound) {
			return &gateway.Error{Category: gateway.ErrNotFound, Param: "id", Message: fmt.Sprintf("no key %q", id)}
		}
		return fmt.Errorf("find key %s: %w", id, err)
	}
	if err := c.deps.Keys.KeyRevoke(r.Context(), &weir.KeyRevokeParams{ID: id, At: c.deps.Clock.Now().UTC()}); err != nil {
		return fmt.Errorf("revoke key %s: %w", id, err)
	}
	c.deps.Logger.Warn("key revoked from the console", "key", id)
	return writeJSON(w, map[string]any{"ok": true, "id": id})
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
