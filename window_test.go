package weir_test

import (
	"errors"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("LoadLocation(%s): %v", name, err)
	}
	return loc
}

// TestWindowBounds: a calendar window is the day, the week from Monday
// or the month in its zone that holds t, whatever daylight saving time
// makes of the day's length; month ends and leap years fall where the
// calendar puts them.
func TestWindowBounds(t *testing.T) {
	t.Parallel()
	berlin, ny := mustZone(t, "Europe/Berlin"), mustZone(t, "America/New_York")
	utc := time.UTC
	for _, tc := range []struct {
		name        string
		w           weir.Window
		at          time.Time
		from, until time.Time
		hours       float64 // the window's length
	}{
		{"a UTC day", weir.Window{Unit: "day"}, time.Date(2026, 3, 1, 23, 59, 59, 0, utc),
			time.Date(2026, 3, 1, 0, 0, 0, 0, utc), time.Date(2026, 3, 2, 0, 0, 0, 0, utc), 24},
		{"the first instant of a day is in it", weir.Window{Unit: "day"}, time.Date(2026, 3, 2, 0, 0, 0, 0, utc),
			time.Date(2026, 3, 2, 0, 0, 0, 0, utc), time.Date(2026, 3, 3, 0, 0, 0, 0, utc), 24},
		{"a Berlin day seen from UTC", weir.Window{Unit: "day", Zone: "Europe/Berlin"}, time.Date(2026, 1, 10, 23, 30, 0, 0, utc),
			time.Date(2026, 1, 11, 0, 0, 0, 0, berlin), time.Date(2026, 1, 12, 0, 0, 0, 0, berlin), 24},
		{"Berlin springs forward: 23 hours", weir.Window{Unit: "day", Zone: "Europe/Berlin"}, time.Date(2026, 3, 29, 12, 0, 0, 0, berlin),
			time.Date(2026, 3, 29, 0, 0, 0, 0, berlin), time.Date(2026, 3, 30, 0, 0, 0, 0, berlin), 23},
		{"Berlin falls back: 25 hours", weir.Window{Unit: "day", Zone: "Europe/Berlin"}, time.Date(2026, 10, 25, 2, 30, 0, 0, utc),
			time.Date(2026, 10, 25, 0, 0, 0, 0, berlin), time.Date(2026, 10, 26, 0, 0, 0, 0, berlin), 25},
		{"New York springs forward: 23 hours", weir.Window{Unit: "day", Zone: "America/New_York"}, time.Date(2026, 3, 8, 3, 30, 0, 0, ny),
			time.Date(2026, 3, 8, 0, 0, 0, 0, ny), time.Date(2026, 3, 9, 0, 0, 0, 0, ny), 23},
		{"New York falls back: 25 hours", weir.Window{Unit: "day", Zone: "America/New_York"}, time.Date(2026, 11, 1, 23, 0, 0, 0, ny),
			time.Date(2026, 11, 1, 0, 0, 0, 0, ny), time.Date(2026, 11, 2, 0, 0, 0, 0, ny), 25},
		{"a week from Monday", weir.Window{Unit: "week"}, time.Date(2026, 3, 5, 8, 0, 0, 0, utc), // a Thursday
			time.Date(2026, 3, 2, 0, 0, 0, 0, utc), time.Date(2026, 3, 9, 0, 0, 0, 0, utc), 168},
		{"a Sunday ends its week", weir.Window{Unit: "week"}, time.Date(2026, 3, 8, 23, 0, 0, 0, utc),
			time.Date(2026, 3, 2, 0, 0, 0, 0, utc), time.Date(2026, 3, 9, 0, 0, 0, 0, utc), 168},
		{"a week across a year's end", weir.Window{Unit: "week"}, time.Date(2027, 1, 1, 12, 0, 0, 0, utc), // a Friday
			time.Date(2026, 12, 28, 0, 0, 0, 0, utc), time.Date(2027, 1, 4, 0, 0, 0, 0, utc), 168},
		{"a Berlin week across its fall back", weir.Window{Unit: "week", Zone: "Europe/Berlin"}, time.Date(2026, 10, 22, 0, 0, 0, 0, berlin),
			time.Date(2026, 10, 19, 0, 0, 0, 0, berlin), time.Date(2026, 10, 26, 0, 0, 0, 0, berlin), 169},
		{"February in a leap year", weir.Window{Unit: "month"}, time.Date(2028, 2, 29, 23, 0, 0, 0, utc),
			time.Date(2028, 2, 1, 0, 0, 0, 0, utc), time.Date(2028, 3, 1, 0, 0, 0, 0, utc), 29 * 24},
		{"February in another year", weir.Window{Unit: "month"}, time.Date(2026, 2, 14, 0, 0, 0, 0, utc),
			time.Date(2026, 2, 1, 0, 0, 0, 0, utc), time.Date(2026, 3, 1, 0, 0, 0, 0, utc), 28 * 24},
		{"December ends a year", weir.Window{Unit: "month"}, time.Date(2026, 12, 31, 23, 59, 0, 0, utc),
			time.Date(2026, 12, 1, 0, 0, 0, 0, utc), time.Date(2027, 1, 1, 0, 0, 0, 0, utc), 31 * 24},
		{"a Berlin March: one hour short", weir.Window{Unit: "month", Zone: "Europe/Berlin"}, time.Date(2026, 3, 31, 22, 30, 0, 0, utc),
			time.Date(2026, 4, 1, 0, 0, 0, 0, berlin), time.Date(2026, 5, 1, 0, 0, 0, 0, berlin), 30 * 24},
		{"a New York month seen from UTC", weir.Window{Unit: "month", Zone: "America/New_York"}, time.Date(2026, 4, 1, 3, 0, 0, 0, utc),
			time.Date(2026, 3, 1, 0, 0, 0, 0, ny), time.Date(2026, 4, 1, 0, 0, 0, 0, ny), 31*24 - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if err := (weir.Budget{Subject: weir.BudgetSubject{Type: "key", Name: "k"}, Amount: 1, Window: tc.w, Mode: weir.BudgetHard}).Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			from, until := tc.w.Bounds(tc.at)
			if !from.Equal(tc.from) || !until.Equal(tc.until) {
				t.Errorf("Bounds(%s) = [%s, %s); want [%s, %s)", tc.at, from, until, tc.from, tc.until)
			}
			if got := until.Sub(from).Hours(); got != tc.hours {
				t.Errorf("the window is %g hours long; want %g", got, tc.hours)
			}
			if tc.at.Before(from) || !tc.at.Before(until) {
				t.Errorf("%s is not in [%s, %s)", tc.at, from, until)
			}
		})
	}
}

// TestWindowPeriods: a rolling window is the period from its anchor that
// holds t, the first one before the anchor; periods follow one another
// without a gap.
func TestWindowPeriods(t *testing.T) {
	t.Parallel()
	anchor := time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)
	w := weir.Window{Every: 7 * 24 * time.Hour, Anchor: anchor}
	week := 7 * 24 * time.Hour
	for _, tc := range []struct {
		at   time.Time
		from time.Time
	}{
		{anchor, anchor},
		{anchor.Add(week - time.Nanosecond), anchor},
		{anchor.Add(week), anchor.Add(week)},
		{anchor.Add(10*week + 3*time.Hour), anchor.Add(10 * week)},
		{anchor.Add(-time.Hour), anchor},
		{anchor.AddDate(-5, 0, 0), anchor},
	} {
		from, until := w.Bounds(tc.at)
		if !from.Equal(tc.from) || until.Sub(from) != week {
			t.Errorf("Bounds(%s) = [%s, %s); want [%s, +7d)", tc.at, from, until, tc.from)
		}
	}
	// Without an anchor, periods run from the Unix epoch.
	h12 := weir.Window{Every: 12 * time.Hour}
	at := time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC)
	if from, until := h12.Bounds(at); !from.Equal(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) || until.Sub(from) != 12*time.Hour {
		t.Errorf("12h from the epoch: Bounds(%s) = [%s, %s)", at, from, until)
	}
	// Far from its anchor, a period still holds t.
	far := anchor.AddDate(400, 0, 0)
	if from, until := w.Bounds(far); far.Before(from) || !far.Before(until) || until.Sub(from) != week {
		t.Errorf("400 years on: Bounds(%s) = [%s, %s)", far, from, until)
	}
}

// TestParseWindow reads what the config and CLI write, and String writes
// it back.
func TestParseWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		want  weir.Window
		write string
	}{
		{"day", weir.Window{Unit: "day"}, "day"},
		{"week", weir.Window{Unit: "week"}, "week"},
		{"month", weir.Window{Unit: "month"}, "month"},
		{"12h", weir.Window{Every: 12 * time.Hour}, "12h"},
		{"7d", weir.Window{Every: 7 * 24 * time.Hour}, "7d"},
		{"30d", weir.Window{Every: 30 * 24 * time.Hour}, "30d"},
		{"90m", weir.Window{Every: 90 * time.Minute}, "1h30m"},
		{"48h", weir.Window{Every: 48 * time.Hour}, "2d"},
		{"1h0m30s", weir.Window{Every: time.Hour + 30*time.Second}, "1h0m30s"},
	} {
		got, err := weir.ParseWindow(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseWindow(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		if s := got.String(); s != tc.write {
			t.Errorf("%q: String() = %q; want %q", tc.in, s, tc.write)
		}
		if again, err := weir.ParseWindow(got.String()); err != nil || again != got {
			t.Errorf("%q: ParseWindow(String()) = %+v, %v", tc.in, again, err)
		}
	}
	for _, bad := range []string{"", "year", "Day", "0d", "-1h", "30s", "1.5d", "d", "7 d", "1500ms", "99999999999d", "1h0.5s"} {
		if w, err := weir.ParseWindow(bad); !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("ParseWindow(%q) = %+v, %v; want ErrInvalid", bad, w, err)
		}
	}
}
