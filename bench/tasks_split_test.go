package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider/mock"
)

func TestParseDBTime(t *testing.T) {
	t.Parallel()
	want := time.Date(2026, 12, 7, 9, 21, 15, 123_000_000, time.UTC)
	for _, s := range []string{
		"2026-12-07 09:21:15.123",        // SQLite's datetime('now', 'subsec')
		"2026-12-07T09:21:15.123000",     // jobTimesPostgres's to_char
		"2026-12-07T09:21:15.123Z",       // RFC 3339, as River writes the times it sets
		"2026-12-07 09:21:15.123+00:00",  // with a zone
		"2026-12-07T09:21:15.123000000Z", // nanoseconds
	} {
		got, err := parseDBTime(s)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseDBTime(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if _, err := parseDBTime("yesterday"); err == nil {
		t.Error("parseDBTime(yesterday): want an error")
	}
}

func TestLeaseSplit(t *testing.T) {
	t.Parallel()
	at := func(ms int) time.Time { return time.Unix(1000, 0).Add(time.Duration(ms) * time.Millisecond) }
	var s leaseSplit
	// Admitted at 0, its job inserted at 2, fetched at 10, submitted at
	// 13; the job ends at 2013, its last poll arrives at 2020, the
	// gateway records the end at 2024.
	s.add(weir.Task{AdmittedAt: at(0), FinishedAt: at(2024)}, mock.JobInfo{CreatedAt: at(13), EndsAt: at(2013)},
		jobTimes{inserted: at(2), fetched: at(10)}, at(2020))
	// Unknown River times and poll: counted in neither.
	s.add(weir.Task{AdmittedAt: at(0), FinishedAt: at(3000)}, mock.JobInfo{CreatedAt: at(500), EndsAt: at(2500)}, jobTimes{}, time.Time{})
	got := s.line()
	for _, want := range []string{"inserted 2ms", "fetched 8ms", "submit 3ms (of 1)", "arrived 7ms", "noticed 4ms (of 1)"} {
		if !strings.Contains(got, want) {
			t.Errorf("line %q lacks %q", got, want)
		}
	}
	if got := (&leaseSplit{}).line(); !strings.Contains(got, "inserted -") {
		t.Errorf("empty split's line %q: want - for the means", got)
	}
}
