package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/keys"
)

// BudgetView is a budget as the admin API shows it: its amount as a
// decimal string, its window as ParseWindow reads it, and the window it
// is in now.
type BudgetView struct {
	ID      string     `json:"id"`
	Object  string     `json:"object"`
	Subject string     `json:"subject"`
	Amount  weir.Money `json:"amount"`
	Window  string     `json:"window"`
	// Zone is a calendar window's ("" is UTC); Anchor, where a rolling
	// window's periods start.
	Zone   string     `json:"zone,omitempty"`
	Anchor *time.Time `json:"anchor,omitempty"`
	Mode   string     `json:"mode"`
	Alerts []int      `json:"alerts"`
	// WindowStart and WindowEnd bound the window now: spend resets at
	// WindowEnd.
	WindowStart time.Time `json:"window_start"`
	WindowEnd   time.Time `json:"window_end"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// budgetView is b as shown at now.
func budgetView(b weir.Budget, now time.Time) BudgetView {
	from, until := b.Window.Bounds(now)
	v := BudgetView{ID: b.ID, Object: "budget", Subject: b.Subject.String(), Amount: b.Amount, Window: b.Window.String(),
		Zone: b.Window.Zone, Mode: string(b.Mode), Alerts: b.Alerts, WindowStart: from, WindowEnd: until,
		CreatedAt: b.CreatedAt, UpdatedAt: b.UpdatedAt}
	if !b.Window.Anchor.IsZero() {
		a := b.Window.Anchor
		v.Anchor = &a
	}
	if v.Alerts == nil {
		v.Alerts = []int{}
	}
	return v
}

// listBudgets answers GET /admin/budgets, all of them or, with
// ?subject=key:ID, one subject's.
func (s *Server) listBudgets(w http.ResponseWriter, r *http.Request) error {
	var f weir.BudgetFilter
	if sub := r.URL.Query().Get("subject"); sub != "" {
		var err error
		if f.Subject, err = weir.ParseBudgetSubject(sub); err != nil {
			return errorf(weir.CodeInvalidRequest, "subject", fmt.Sprintf("subject %q: want type:name, such as key:key_abc or group:default", sub))
		}
	}
	bs, err := s.deps.Budgets.BudgetList(r.Context(), f)
	if err != nil {
		return s.budgetStoreError(w, r, "could not list budgets", err)
	}
	now := s.deps.Clock.Now()
	out := struct {
		Object string       `json:"object"`
		Data   []BudgetView `json:"data"`
	}{Object: "list", Data: make([]BudgetView, 0, len(bs))}
	for _, b := range bs {
		out.Data = append(out.Data, budgetView(b, now))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// budgetCreate is the body of POST /admin/budgets.
type budgetCreate struct {
	Subject string      `json:"subject"`
	Amount  *weir.Money `json:"amount"`
	Window  string      `json:"window"`
	Zone    string      `json:"zone"`
	Anchor  *time.Time  `json:"anchor"`
	Mode    string      `json:"mode"`
	Alerts  []int       `json:"alerts"`
}

// createBudget answers POST /admin/budgets: 201 and the budget.
func (s *Server) createBudget(w http.ResponseWriter, r *http.Request) error {
	var in budgetCreate
	if aerr := s.readAdminBody(w, r, &in); aerr != nil {
		return aerr
	}
	b, aerr := in.budget(s.deps.Clock.Now())
	if aerr != nil {
		return aerr
	}
	id, err := keys.NewID(weir.BudgetIDPrefix)
	if err != nil {
		return s.budgetStoreError(w, r, "could not make a budget id", err)
	}
	b.ID = id
	err = s.deps.Budgets.BudgetCreate(r.Context(), b)
	if errors.Is(err, weir.ErrConflict) {
		return errorf(weir.CodeInvalidRequest, "window", fmt.Sprintf("%s already has a budget over a %s window: change that one (PATCH), or delete it first", b.Subject, b.Window))
	}
	if err != nil {
		return s.budgetStoreError(w, r, "could not create the budget", err)
	}
	writeJSON(w, http.StatusCreated, budgetView(b, s.deps.Clock.Now()))
	return nil
}

// budget is the budget in is, made at now, with its defaults, or the
// invalid_request naming the field at fault.
func (in budgetCreate) budget(now time.Time) (weir.Budget, *apiError) {
	sub, err := weir.ParseBudgetSubject(in.Subject)
	if err != nil {
		return weir.Budget{}, errorf(weir.CodeInvalidRequest, "subject", fmt.Sprintf("subject %q: want type:name, such as key:key_abc or group:default", in.Subject))
	}
	if in.Amount == nil {
		return weir.Budget{}, errorf(weir.CodeInvalidRequest, "amount", "amount is required: a decimal string such as \"50.00\"")
	}
	win, err := weir.ParseWindow(in.Window)
	if err != nil {
		return weir.Budget{}, errorf(weir.CodeInvalidRequest, "window", fmt.Sprintf("window %q: want day, week, month or a duration such as 12h or 30d", in.Window))
	}
	win.Zone = in.Zone
	if in.Anchor != nil {
		win.Anchor = *in.Anchor
	}
	b := weir.Budget{Subject: sub, Amount: *in.Amount, Window: win, Mode: weir.BudgetMode(in.Mode), Alerts: in.Alerts,
		CreatedAt: now, UpdatedAt: now}.WithDefaults()
	if aerr := fieldErrorAnswer(b.Validate()); aerr != nil {
		return weir.Budget{}, aerr
	}
	return b, nil
}

// getBudget answers GET /admin/budgets/{id}.
func (s *Server) getBudget(w http.ResponseWriter, r *http.Request) error {
	b, err := s.deps.Budgets.BudgetGet(r.Context(), r.PathValue("id"))
	if err != nil {
		return s.budgetStoreError(w, r, "could not load the budget", err)
	}
	writeJSON(w, http.StatusOK, budgetView(b, s.deps.Clock.Now()))
	return nil
}

// budgetPatch is the body of PATCH /admin/budgets/{id}: what is given
// changes. The subject and window are a budget's identity, not changed.
type budgetPatch struct {
	Amount *weir.Money `json:"amount"`
	Mode   *string     `json:"mode"`
	Alerts *[]int      `json:"alerts"`
	// What may not change, read to say so.
	Subject json.RawMessage `json:"subject"`
	Window  json.RawMessage `json:"window"`
	Zone    json.RawMessage `json:"zone"`
	Anchor  json.RawMessage `json:"anchor"`
}

// fixed names the first field of p that may not change, if any.
func (p budgetPatch) fixed() string {
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{{"subject", p.Subject}, {"window", p.Window}, {"zone", p.Zone}, {"anchor", p.Anchor}} {
		if f.raw != nil {
			return f.name
		}
	}
	return ""
}

// updateBudget answers PATCH /admin/budgets/{id}: the budget raised or
// lowered, its mode or alerts changed, at once on every replica that
// reads the store. The last write wins.
func (s *Server) updateBudget(w http.ResponseWriter, r *http.Request) error {
	var in budgetPatch
	if aerr := s.readAdminBody(w, r, &in); aerr != nil {
		return aerr
	}
	if f := in.fixed(); f != "" {
		return errorf(weir.CodeInvalidRequest, f, fmt.Sprintf("a budget's %s cannot change: delete it and create another", f))
	}
	p := weir.BudgetUpdateParams{ID: r.PathValue("id"), Amount: in.Amount, Alerts: in.Alerts, At: s.deps.Clock.Now()}
	if in.Mode != nil {
		m := weir.BudgetMode(*in.Mode)
		p.Mode = &m
	}
	if aerr := fieldErrorAnswer(p.Validate()); aerr != nil {
		return aerr
	}
	b, err := s.deps.Budgets.BudgetUpdate(r.Context(), &p)
	if err != nil {
		return s.budgetStoreError(w, r, "could not update the budget", err)
	}
	writeJSON(w, http.StatusOK, budgetView(b, s.deps.Clock.Now()))
	return nil
}

// deleteBudget answers DELETE /admin/budgets/{id}.
func (s *Server) deleteBudget(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := s.deps.Budgets.BudgetDelete(r.Context(), id); err != nil {
		return s.budgetStoreError(w, r, "could not delete the budget", err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "budget.deleted", "deleted": true})
	return nil
}

// readAdminBody reads a JSON object into v, refusing a field v does not
// have, or a value v's field does not take, by its name: each field is
// decoded alone, as a value's own UnmarshalJSON does not say its field.
func (s *Server) readAdminBody(w http.ResponseWriter, r *http.Request, v any) *apiError {
	if aerr := s.limitBody(w, r); aerr != nil {
		return aerr
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return s.bodyError(err, "could not read the body")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return errorf(weir.CodeInvalidRequest, "", "the body must be a JSON object")
	}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		one, err := json.Marshal(map[string]json.RawMessage{name: fields[name]})
		if err != nil {
			return errorf(weir.CodeInvalidRequest, name, fmt.Sprintf("%s: %v", name, err))
		}
		dec := json.NewDecoder(bytes.NewReader(one))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return errorf(weir.CodeInvalidRequest, name, fieldDecodeMessage(name, err))
		}
	}
	return nil
}

// fieldDecodeMessage says what was wrong with field name's value.
func fieldDecodeMessage(name string, err error) string {
	var ute *json.UnmarshalTypeError
	switch {
	case errors.As(err, &ute):
		return fmt.Sprintf("%s must not be a JSON %s", name, ute.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return fmt.Sprintf("unknown field %q", name)
	}
	return fmt.Sprintf("%s: %v", name, err)
}

// fieldErrorAnswer is err, a *weir.FieldError, as invalid_request naming
// its field; nil for nil.
func fieldErrorAnswer(err error) *apiError {
	if err == nil {
		return nil
	}
	var fe *weir.FieldError
	if errors.As(err, &fe) {
		return errorf(weir.CodeInvalidRequest, fe.Path, fe.Msg)
	}
	return errorf(weir.CodeInvalidRequest, "", err.Error())
}

// budgetStoreError answers a store's failure: not_found for an unknown
// id, invalid_request for what it refused, else store_unavailable,
// logged with its cause.
func (s *Server) budgetStoreError(w http.ResponseWriter, r *http.Request, what string, err error) *apiError {
	switch {
	case errors.Is(err, weir.ErrNotFound):
		return errorf(weir.CodeNotFound, "id", fmt.Sprintf("no budget %q", r.PathValue("id")))
	case errors.Is(err, weir.ErrInvalid):
		return fieldErrorAnswer(err)
	}
	infoOf(w).log().Error(what, "error", err)
	return errorf(weir.CodeStoreUnavailable, "", what+": nothing changed")
}
