package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/gateway"
)

// The tasks view: listing, one task's detail with its events and
// callback deliveries, and cancelling one.

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
