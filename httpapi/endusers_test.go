package httpapi

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/weir-gateway/weir"
)

// TestEndUserRecordedAndBudgeted: the end user a request names — a
// chat's user (its safety_identifier first), a Responses request's user,
// a Messages request's metadata.user_id — is in its usage record and
// counts in its own budget of a budget of every end user; a request that
// names none is counted by none.
func TestEndUserRecordedAndBudgeted(t *testing.T) {
	t.Parallel()
	records := make(chan weir.Usage, 8)
	every := weir.BudgetSubject{Type: "user", Name: weir.EveryEndUser}
	month, _ := weir.ParseWindow("month")
	budget := weir.Budget{ID: weir.ConfigBudgetID(every, month), Subject: every, Amount: weir.MoneyScale, Window: month}.WithDefaults()
	b := setup(t, setupOpts{
		deps: func(d *Deps) { d.Usage = func(u weir.Usage) { records <- u } },
		catalog: &weir.Catalog{
			Platforms: []weir.Platform{{Name: "up", Kind: "openai", BaseURL: "UP"}},
			PlatformModels: []weir.PlatformModel{{Name: "up/m", Platform: "up", Upstream: "gpt-4o-mini",
				Price: weir.Price{Input: 1_000_000, Output: 1_000_000}}},
			Models:  []weir.Model{{Name: "m", Kind: weir.KindChat, Candidates: []weir.Candidate{{PlatformModel: "up/m", Weight: 1}}}},
			Budgets: []weir.Budget{budget},
		},
	})
	const chat = `{"model":"m","messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		path, body, want string
	}{
		{"/v1/chat/completions", chat + `,"user":"alice"}`, "alice"},
		{"/v1/chat/completions", chat + `,"user":"u","safety_identifier":"sid"}`, "sid"},
		{"/v1/chat/completions", chat + `,"user":null}`, ""},
		{"/v1/messages", `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"hi"}],"metadata":{"user_id":"bob"}}`, "bob"},
		{"/v1/responses", `{"model":"m","input":"hi","user":"carol"}`, "carol"},
	} {
		resp := b.post(t, tc.path, tc.body, http.Header{"Anthropic-Version": {"2023-06-01"}})
		if body, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: status %d: %s", tc.path, tc.body, resp.StatusCode, body)
		}
		if u := <-records; u.EndUser != tc.want {
			t.Errorf("%s %s: record's end user %q; want %q", tc.path, tc.body, u.EndUser, tc.want)
		}
		if tc.want == "" {
			continue
		}
		st, err := b.engine.Scope(t.Context(), weir.BudgetScope(weir.EndUserBudgetID(budget.ID, tc.want)))
		if err != nil || st.BudgetSpent == 0 {
			t.Errorf("%s: %s's budget: spent %d, %v; want what the request cost", tc.path, tc.want, st.BudgetSpent, err)
		}
	}
}

// TestEndUserRefused: an end user id that is too long, not a string, or
// holds a control character is refused with 400, naming the parameter,
// never cut short.
func TestEndUserRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	const chat = `{"model":"m","messages":[{"role":"user","content":"hi"}]`
	long := strings.Repeat("u", weir.MaxEndUserBytes+1)
	for _, tc := range []struct{ body, param string }{
		{chat + `,"user":"` + long + `"}`, "user"},
		{chat + `,"user":"a\nb"}`, "user"},
		{chat + `,"user":5}`, "user"},
		{chat + `,"safety_identifier":"a\u0000b"}`, "safety_identifier"},
	} {
		resp := b.post(t, "/v1/chat/completions", tc.body, nil)
		body, _ := io.ReadAll(resp.Body)
		wantError(t, resp, body, http.StatusBadRequest, weir.CodeInvalidRequest, tc.param)
	}
	resp := b.post(t, "/v1/responses", `{"model":"m","input":"hi","safety_identifier":"`+long+`"}`, nil)
	body, _ := io.ReadAll(resp.Body)
	wantError(t, resp, body, http.StatusBadRequest, weir.CodeInvalidRequest, "safety_identifier")
	e := anthropicErrorOf(t, b.postMessages(t, "/v1/messages",
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"metadata":{"user_id":"`+long+`"}}`),
		http.StatusBadRequest, "invalid_request_error")
	if msg, _ := e["message"].(string); !strings.Contains(msg, "metadata.user_id") {
		t.Errorf("a Messages request's end user too long: %v; want the message to name metadata.user_id", e)
	}
	if got := strings.Repeat("u", weir.MaxEndUserBytes); true {
		resp := b.post(t, "/v1/chat/completions", chat+`,"user":"`+got+`"}`, nil)
		if body, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK {
			t.Errorf("an end user of %d bytes: %d %s; want it served", len(got), resp.StatusCode, body)
		}
	}
}
