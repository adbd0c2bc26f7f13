package weir_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// TestBudgetValidate names the field at fault, as the config file and the
// admin API name it, and matches ErrInvalid.
func TestBudgetValidate(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	valid := func() weir.Budget {
		return weir.Budget{ID: "bgt_1", Subject: weir.BudgetSubject{Type: "key", Name: "key_abc"}, Amount: 50 * weir.MoneyScale,
			Window: weir.Window{Unit: "month", Zone: "Europe/Berlin"}, Mode: weir.BudgetSoft, Alerts: []int{80, 100},
			CreatedAt: at, UpdatedAt: at}
	}
	for _, tc := range []struct {
		name string
		edit func(b *weir.Budget)
		want string // the field named; "" valid
	}{
		{"valid", func(b *weir.Budget) {}, ""},
		{"a rolling window", func(b *weir.Budget) { b.Window = weir.Window{Every: 30 * 24 * time.Hour, Anchor: at} }, ""},
		{"alerts past the amount", func(b *weir.Budget) { b.Alerts = []int{50, 100, 150, 1000} }, ""},
		{"no alerts", func(b *weir.Budget) { b.Alerts = nil }, ""},
		{"unknown subject type", func(b *weir.Budget) { b.Subject.Type = "customer" }, "subject"},
		{"an end user", func(b *weir.Budget) { b.Subject = weir.BudgetSubject{Type: "user", Name: "alice"} }, ""},
		{"every end user", func(b *weir.Budget) { b.Subject = weir.BudgetSubject{Type: "user", Name: "*"} }, ""},
		{"an end user with a control character", func(b *weir.Budget) { b.Subject = weir.BudgetSubject{Type: "user", Name: "a\tb"} }, "subject"},
		{"an end user too long", func(b *weir.Budget) {
			b.Subject = weir.BudgetSubject{Type: "user", Name: strings.Repeat("u", weir.MaxEndUserBytes+1)}
		}, "subject"},
		{"no subject name", func(b *weir.Budget) { b.Subject.Name = "" }, "subject"},
		{"no amount", func(b *weir.Budget) { b.Amount = 0 }, "amount"},
		{"negative amount", func(b *weir.Budget) { b.Amount = -1 }, "amount"},
		{"no window", func(b *weir.Budget) { b.Window = weir.Window{} }, "window"},
		{"unknown unit", func(b *weir.Budget) { b.Window.Unit = "year" }, "window"},
		{"a calendar window with a period", func(b *weir.Budget) { b.Window.Every = time.Hour }, "window"},
		{"a rolling window too short", func(b *weir.Budget) { b.Window = weir.Window{Every: time.Second} }, "window"},
		{"a rolling window with a zone", func(b *weir.Budget) { b.Window = weir.Window{Every: time.Hour, Zone: "Europe/Berlin"} }, "zone"},
		{"unknown zone", func(b *weir.Budget) { b.Window.Zone = "Mars/Olympus" }, "zone"},
		{"the machine's zone", func(b *weir.Budget) { b.Window.Zone = "Local" }, "zone"},
		{"no mode", func(b *weir.Budget) { b.Mode = "" }, "mode"},
		{"unknown mode", func(b *weir.Budget) { b.Mode = "strict" }, "mode"},
		{"alert 0", func(b *weir.Budget) { b.Alerts = []int{0, 100} }, "alerts"},
		{"alert past 1000", func(b *weir.Budget) { b.Alerts = []int{1001} }, "alerts"},
		{"alerts descending", func(b *weir.Budget) { b.Alerts = []int{100, 80} }, "alerts"},
		{"an alert twice", func(b *weir.Budget) { b.Alerts = []int{80, 80} }, "alerts"},
		{"nine alerts", func(b *weir.Budget) { b.Alerts = []int{10, 20, 30, 40, 50, 60, 70, 80, 90} }, "alerts"},
	} {
		b := valid()
		tc.edit(&b)
		err := b.Validate()
		var fe *weir.FieldError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: Validate() = %v; want nil", tc.name, err)
		case tc.want != "" && (!errors.As(err, &fe) || fe.Path != tc.want || !errors.Is(err, weir.ErrInvalid)):
			t.Errorf("%s: Validate() = %v; want a FieldError at %q", tc.name, err, tc.want)
		}
	}
	b := valid()
	b.ID = ""
	if err := b.ValidateStored(); !errors.Is(err, weir.ErrInvalid) {
		t.Errorf("ValidateStored without an ID: %v; want ErrInvalid", err)
	}
	b = valid()
	b.UpdatedAt = time.Time{}
	if err := b.ValidateStored(); !errors.Is(err, weir.ErrInvalid) {
		t.Errorf("ValidateStored without an update time: %v; want ErrInvalid", err)
	}
}

// TestBudgetWithDefaults: a budget without a mode is hard, and a rolling
// window without an anchor starts at the budget's creation.
func TestBudgetWithDefaults(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	b := weir.Budget{Window: weir.Window{Every: time.Hour}, CreatedAt: at}.WithDefaults()
	if b.Mode != weir.BudgetHard || !b.Window.Anchor.Equal(at) {
		t.Errorf("WithDefaults() = mode %q, anchor %s; want hard, %s", b.Mode, b.Window.Anchor, at)
	}
	c := weir.Budget{Window: weir.Window{Unit: "day"}, Mode: weir.BudgetShadow, CreatedAt: at}.WithDefaults()
	if c.Mode != weir.BudgetShadow || !c.Window.Anchor.IsZero() {
		t.Errorf("WithDefaults() of a calendar shadow budget = %+v; want it unchanged", c)
	}
}

func TestParseBudgetSubject(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want weir.BudgetSubject
	}{
		{"key:key_abc", weir.BudgetSubject{Type: "key", Name: "key_abc"}},
		{"group:default", weir.BudgetSubject{Type: "group", Name: "default"}},
		{"model:gpt-4o", weir.BudgetSubject{Type: "model", Name: "gpt-4o"}},
		{"platform_model:openai/gpt-4o:2024", weir.BudgetSubject{Type: "platform_model", Name: "openai/gpt-4o:2024"}},
		{"user:alice@example.com", weir.BudgetSubject{Type: "user", Name: "alice@example.com"}},
		{"user:*", weir.BudgetSubject{Type: "user", Name: "*"}},
	} {
		got, err := weir.ParseBudgetSubject(tc.in)
		if err != nil || got != tc.want || got.String() != tc.in {
			t.Errorf("ParseBudgetSubject(%q) = %+v, %v (String %q); want %+v", tc.in, got, err, got.String(), tc.want)
		}
	}
	for _, bad := range []string{"", "key", "key:", ":abc", "customer:abc", "KEY:abc", "user:", "user:a\nb"} {
		if _, err := weir.ParseBudgetSubject(bad); !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("ParseBudgetSubject(%q): %v; want ErrInvalid", bad, err)
		}
	}
}

func TestParseBudgetSpec(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in     string
		amount weir.Money
		window weir.Window
	}{
		{"50/month", 50 * weir.MoneyScale, weir.Window{Unit: "month"}},
		{"12.50/day", 12*weir.MoneyScale + weir.MoneyScale/2, weir.Window{Unit: "day"}},
		{"100/30d", 100 * weir.MoneyScale, weir.Window{Every: 30 * 24 * time.Hour}},
		{"0.001/12h", weir.MoneyScale / 1000, weir.Window{Every: 12 * time.Hour}},
	} {
		m, w, err := weir.ParseBudgetSpec(tc.in)
		if err != nil || m != tc.amount || w != tc.window {
			t.Errorf("ParseBudgetSpec(%q) = %v, %+v, %v; want %v, %+v", tc.in, m, w, err, tc.amount, tc.window)
		}
	}
	for _, bad := range []string{"", "50", "50/", "/month", "0/month", "-5/month", "5/year", "1e3/day", "50/month/x"} {
		if _, _, err := weir.ParseBudgetSpec(bad); !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("ParseBudgetSpec(%q): %v; want ErrInvalid", bad, err)
		}
	}
	if id := weir.ConfigBudgetID(weir.BudgetSubject{Type: "group", Name: "default"}, weir.Window{Unit: "month"}); id != "cfg:group:default:month" {
		t.Errorf("ConfigBudgetID = %q", id)
	}
}
