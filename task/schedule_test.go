package task

import (
	"fmt"
	"testing"
	"time"
)

// linearJob reports progress as the mock provider and most media APIs do:
// the share of its length run so far, truncated, 99 at most while it runs.
type linearJob struct {
	length time.Duration
	// stuck, if set, holds progress at 99 from then until length.
	stuck time.Duration
}

func (j linearJob) at(elapsed time.Duration) (done bool, progress int) {
	if elapsed >= j.length {
		return true, 100
	}
	if j.stuck > 0 && elapsed >= j.stuck {
		return false, 99
	}
	span := j.length
	if j.stuck > 0 {
		span = j.stuck * 100 / 99
	}
	return false, min(int(int64(elapsed)*100/int64(span)), 99)
}

// follow plays the poll schedule against j from submit (PollMin after it,
// as the worker does), returning the number of polls and how late the one
// that saw the end came.
func followJob(s *Service, j linearJob) (polls int, late time.Duration) {
	return followJobAfter(s, j, 0)
}

func TestPollScheduleFollowsProgress(t *testing.T) {
	t.Parallel()
	s := &Service{}
	s.cfg.defaults()
	for _, tc := range []struct {
		job      linearJob
		maxPolls int
		maxLate  time.Duration
	}{
		// A job's end is seen within max(pollFloor, 1% of its length)
		// and a few polls.
		{linearJob{length: time.Second}, 5, pollFloor},
		{linearJob{length: 2 * time.Second}, 5, pollFloor + 2*time.Millisecond},
		{linearJob{length: 30 * time.Second}, 6, 300 * time.Millisecond},
		{linearJob{length: 3 * time.Minute}, 30, 1800 * time.Millisecond},
		// PollMax bounds the waits of long jobs (18 and 120 polls at
		// least).
		{linearJob{length: 20 * time.Minute}, 135, 10 * time.Second},
		// Stuck at 99% for an hour: the step doubles, so a handful of
		// polls (PollMax bounds the rest), not one every 1%.
		{linearJob{length: time.Hour + time.Minute, stuck: time.Minute}, 380, 10 * time.Second},
	} {
		polls, late := followJob(s, tc.job)
		if late < 0 || late > tc.maxLate || polls > tc.maxPolls {
			t.Errorf("job %+v: %d polls, end seen %s late; want <= %d polls, <= %s late", tc.job, polls, late, tc.maxPolls, tc.maxLate)
		}
	}
}

func TestPollScheduleStuckJobBacksOff(t *testing.T) {
	t.Parallel()
	s := &Service{}
	s.cfg.defaults()
	s.cfg.PollMax = time.Hour // only the doubling bounds the polls
	polls, _ := followJob(s, linearJob{length: time.Hour + time.Minute, stuck: time.Minute})
	if polls > 30 {
		t.Errorf("a job stuck at 99%% for an hour took %d polls, want a logarithmic number (<= 30)", polls)
	}
}

func TestPollScheduleWithoutProgressDoubles(t *testing.T) {
	t.Parallel()
	s := &Service{}
	s.cfg.defaults()
	r := &run{started: time.Unix(0, 0)}
	var got []time.Duration
	for _, ran := range []time.Duration{0, time.Second, 2 * time.Second, 10 * time.Second, time.Minute, time.Hour} {
		got = append(got, s.nextPoll(r, 0, r.started.Add(ran)))
	}
	want := []time.Duration{250 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, 4 * time.Second, 10 * time.Second, 10 * time.Second}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("waits without progress %v, want %v", got, want)
	}
}

// followJobAfter is followJob for a job that started upstream ahead of
// the time the gateway gives it (run.started: its submit's return, which
// came ahead after the job began).
func followJobAfter(s *Service, j linearJob, ahead time.Duration) (polls int, late time.Duration) {
	start := time.Unix(1_700_000_000, 0)
	r := &run{started: start}
	at := start.Add(s.cfg.PollMin)
	for polls = 1; polls < 10_000; polls++ {
		done, p := j.at(at.Sub(start) + ahead)
		if done {
			return polls, at.Sub(start) + ahead - j.length
		}
		wait := s.nextPoll(r, p, at)
		if wait <= 0 || wait > s.cfg.PollMax {
			panic(fmt.Sprintf("wait %s out of (0, %s]", wait, s.cfg.PollMax))
		}
		at = at.Add(wait)
	}
	return polls, -1
}

func TestPollScheduleStepsThroughTheWindow(t *testing.T) {
	t.Parallel()
	s := &Service{}
	s.cfg.defaults()
	// However late the gateway's clock of the job runs (its submit's
	// answer took up to 40ms), a poll before the latest end a reading
	// allowed is no miss: the end of a 2s job is seen within one step
	// (pollFloor, 1% of it) and a few polls, not after a doubled step.
	for ahead := time.Duration(0); ahead <= 40*time.Millisecond; ahead += time.Millisecond {
		polls, late := followJobAfter(s, linearJob{length: 2 * time.Second}, ahead)
		if late < 0 || late > pollFloor+time.Millisecond || polls > 6 {
			t.Errorf("job ahead by %s: %d polls, end seen %s late; want <= 6 polls, <= %s late", ahead, polls, late, pollFloor+time.Millisecond)
		}
	}
}

// followLearnt plays the poll schedule against j as the worker does for
// a job of platform model pm it submitted: first polled at firstPoll,
// its length learnt once a poll sees its end.
func followLearnt(s *Service, pm string, j linearJob) (polls int, late time.Duration) {
	start := time.Unix(1_700_000_000, 0)
	r := &run{started: start, learns: true}
	at := start.Add(s.firstPoll(pm))
	for polls = 1; polls < 10_000; polls++ {
		done, p := j.at(at.Sub(start))
		if done {
			s.learnLength(pm, r)
			return polls, at.Sub(start) - j.length
		}
		r.running = at
		at = at.Add(s.nextPoll(r, p, at))
	}
	return polls, -1
}

// TestFirstPollLearntFromRecentJobs: once a platform model has run a
// few jobs, its next job's first poll comes near the end the shortest of
// them had, and its end is seen as promptly in fewer polls; a shorter
// job, seen late, puts the first polls back at PollMin until it is no
// longer among the last; PollMax bounds the first wait.
func TestFirstPollLearntFromRecentJobs(t *testing.T) {
	t.Parallel()
	s := &Service{}
	s.cfg.defaults()
	two := linearJob{length: 2 * time.Second}
	var first int
	for i := range learnFrom {
		polls, late := followLearnt(s, "vid/a", two)
		if late < 0 || late > pollFloor+2*time.Millisecond {
			t.Fatalf("job %d: end seen %s late", i+1, late)
		}
		first = polls
	}
	polls, late := followLearnt(s, "vid/a", two)
	if polls >= first || polls > 3 || late < 0 || late > pollFloor+2*time.Millisecond {
		t.Fatalf("a 2s job after %d of them: %d polls (before: %d), end seen %s late; want fewer, <= 3, as prompt", learnFrom, polls, first, late)
	}
	if d := s.firstPoll("vid/b"); d != s.cfg.PollMin {
		t.Errorf("another platform model's first poll after %s, want PollMin", d)
	}

	// A 1s job is first polled at 1.8s; after it, the first poll is at
	// PollMin again for recentJobs jobs.
	if _, late := followLearnt(s, "vid/a", linearJob{length: time.Second}); late <= 0 || late > time.Second {
		t.Fatalf("a 1s job after 2s ones: end seen %s late; want after its first poll, at 1.8s", late)
	}
	for i := range recentJobs {
		if d := s.firstPoll("vid/a"); d != s.cfg.PollMin {
			t.Fatalf("first poll %s after %d jobs since a shorter one; want PollMin", d, i)
		}
		followLearnt(s, "vid/a", two)
	}
	if d := s.firstPoll("vid/a"); d <= s.cfg.PollMin {
		t.Errorf("first poll %s once the shorter job has left the last %d; want learnt again", d, recentJobs)
	}

	for range learnFrom {
		followLearnt(s, "vid/long", linearJob{length: time.Hour})
	}
	if d := s.firstPoll("vid/long"); d != s.cfg.PollMax {
		t.Errorf("an hour-long job's first poll after %s, want PollMax", d)
	}
}
