package main

import (
	"strings"
	"testing"

	"github.com/weir-gateway/weir/httpapi"
)

// TestPrintQueuesShadow: a scope in shadow is marked in the table, and
// what its limits would have done is listed under it; a key's only with
// --all.
func TestPrintQueuesShadow(t *testing.T) {
	t.Parallel()
	view := httpapi.QueueView{Scopes: []httpapi.ScopeView{
		{Name: "group:team", Limit: 8},
		{Name: "key:k1", Limit: 1, Shadow: true, Would: &httpapi.ShadowView{Waits: 2}},
		{Name: "pm:up/m", Limit: 1, InFlight: 5, Leases: 5, Shadow: true, Would: &httpapi.ShadowView{Waits: 4, Refusals: 1, Queued: 4}},
	}}
	var b strings.Builder
	printQueues(&b, view, false)
	out := b.String()
	for _, want := range []string{"pm:up/m (shadow)", "limits in shadow", "WOULD WAIT NOW"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var row string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "pm:up/m ") && !strings.Contains(line, "(shadow)") {
			row = line
		}
	}
	if f := strings.Fields(row); len(f) != 6 || f[1] != "true" || f[2] != "4" || f[3] != "4" || f[4] != "1" || f[5] != "0" {
		t.Errorf("shadow row of pm:up/m = %q; want true, 4 would wait now, 4 waits, 1 refusal, 0 timeouts", row)
	}
	if strings.Contains(out, "key:k1") || strings.Contains(out, "group:team (shadow)") {
		t.Errorf("output names a key scope without --all, or marks an enforced scope:\n%s", out)
	}
	b.Reset()
	printQueues(&b, view, true)
	if !strings.Contains(b.String(), "key:k1 (shadow)") {
		t.Errorf("--all output lacks the key's shadow scope:\n%s", b.String())
	}
}
