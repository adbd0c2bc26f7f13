package console

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/weir-gateway/weir/gateway"
)

// The queue view of one scope, and the actions on a queue: cancel a
// waiter, drain a platform model, set a scope's limit.

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
