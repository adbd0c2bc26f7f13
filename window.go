package weir

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The calendar units a Window may have.
const (
	WindowDay   = "day"
	WindowWeek  = "week"
	WindowMonth = "month"
)

// minWindowEvery is the shortest rolling window: a budget over less is a
// rate limit, which the RPM and TPM limits already are.
const minWindowEvery = time.Minute

// ParseWindow reads a window as the config file and the CLI write it: a
// calendar unit ("day", "week", "month") or a rolling duration ("12h",
// "7d", "30d", "90m"; a "d" is 24 hours). Zone and Anchor are left for
// the caller to set.
func ParseWindow(s string) (Window, error) {
	switch s {
	case WindowDay, WindowWeek, WindowMonth:
		return Window{Unit: s}, nil
	}
	every, err := parseEvery(s)
	if err != nil {
		return Window{}, err
	}
	w := Window{Every: every}
	if err := w.validate(); err != nil {
		return Window{}, fmt.Errorf("%w: window %q: %s", ErrInvalid, s, err.Msg)
	}
	return w, nil
}

// parseEvery reads "7d" as days, anything else as a Go duration.
func parseEvery(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok && allDigits(n) && n != "" {
		days, err := strconv.ParseInt(n, 10, 64)
		if err != nil || days > 100_000 {
			return 0, fmt.Errorf("%w: window %q is too long", ErrInvalid, s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%w: window %q: want day, week, month or a duration such as 12h or 30d", ErrInvalid, s)
	}
	return d, nil
}

// Calendar reports whether w is a calendar day, week or month rather
// than a rolling period.
func (w Window) Calendar() bool { return w.Unit != "" }

// String writes w's length as ParseWindow reads it: its unit, or its
// period in days ("7d") when whole days, else as a Go duration without
// zero parts ("12h", "1h30m"). Zone and Anchor are not part of it.
func (w Window) String() string {
	if w.Calendar() {
		return w.Unit
	}
	const day = 24 * time.Hour
	if w.Every > 0 && w.Every%day == 0 {
		return strconv.FormatInt(int64(w.Every/day), 10) + "d"
	}
	s := w.Every.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// validate reports what is wrong with w as a *FieldError naming the
// field as the config file does ("window", "zone", "anchor").
func (w Window) validate() *FieldError {
	switch {
	case w.Calendar() && w.Unit != WindowDay && w.Unit != WindowWeek && w.Unit != WindowMonth:
		return invalidf("window", "unknown unit %q: want day, week, month or a duration such as 12h or 30d", w.Unit)
	case w.Calendar() && (w.Every != 0 || !w.Anchor.IsZero()):
		return invalidf("window", "a calendar %s has no period or anchor", w.Unit)
	case !w.Calendar() && w.Every <= 0:
		return invalidf("window", "required: day, week, month or a duration such as 12h or 30d")
	case !w.Calendar() && w.Every < minWindowEvery:
		return invalidf("window", "%s is shorter than the shortest window, %s", w.Every, minWindowEvery)
	case !w.Calendar() && w.Every%time.Second != 0:
		return invalidf("window", "%s is not a whole number of seconds", w.Every)
	case !w.Calendar() && w.Zone != "":
		return invalidf("zone", "a rolling window of %s has no time zone: it runs from its anchor", w)
	}
	if _, err := loadZone(w.Zone); err != nil {
		return invalidf("zone", "unknown time zone %q: want an IANA name such as Europe/Berlin", w.Zone)
	}
	return nil
}

// Bounds is the window that contains t: [from, until). A calendar
// window is the day, the week from Monday 00:00, or the month in w.Zone
// that contains t, so a day across a change of daylight saving time is
// 23 or 25 hours long. A rolling window is the period of Every from
// Anchor (the Unix epoch if zero) that contains t; for a t before Anchor,
// the first period. A zone Validate refuses counts as UTC.
func (w Window) Bounds(t time.Time) (from, until time.Time) {
	if !w.Calendar() {
		return w.period(t)
	}
	loc, err := loadZone(w.Zone)
	if err != nil {
		loc = time.UTC
	}
	y, m, d := t.In(loc).Date()
	switch w.Unit {
	case WindowWeek:
		back := (int(t.In(loc).Weekday()) + 6) % 7 // days since Monday
		return time.Date(y, m, d-back, 0, 0, 0, 0, loc), time.Date(y, m, d-back+7, 0, 0, 0, 0, loc)
	case WindowMonth:
		return time.Date(y, m, 1, 0, 0, 0, 0, loc), time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
	}
	return time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+1, 0, 0, 0, 0, loc)
}

// period is Bounds of a rolling window.
func (w Window) period(t time.Time) (from, until time.Time) {
	anchor := w.Anchor
	if anchor.IsZero() {
		anchor = time.Unix(0, 0).UTC()
	}
	every := w.Every
	if every <= 0 {
		every = minWindowEvery
	}
	if t.Before(anchor) {
		return anchor, anchor.Add(every)
	}
	// Sub saturates some 292 years out; step from a nearer start then.
	from = anchor
	for {
		since := t.Sub(from)
		n := since / every
		from = from.Add(n * every)
		if since < 1<<62 {
			return from, from.Add(every)
		}
	}
}

// zones caches the locations loadZone has read: time.LoadLocation reads
// a file each time, and Bounds is called per request.
var zones sync.Map // name → *time.Location

// loadZone is the IANA location name; "" (and "UTC") is UTC.
func loadZone(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	// "Local" names the machine's zone, which a budget must not depend
	// on.
	if name == "Local" {
		return nil, fmt.Errorf("%w: zone Local", ErrInvalid)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	zones.Store(name, loc)
	return loc, nil
}
