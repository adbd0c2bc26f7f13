package task

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider"
)

// When to poll.
//
// A slot is only given to the next task once the gateway has noticed that
// the job holding it ended, so every moment between an upstream job's end
// and the poll that sees it is capacity standing idle. Polling often closes
// that gap and spends the upstream's patience (and its poll rate limits);
// polling at a doubling interval wastes up to half the job's length. Most
// media APIs report progress, and a job's progress tells when it will end:
// a job at p% after e has run ends between e·100/(p+1) and e·100/p if it
// advances evenly. So the next poll is at the earliest end the progress
// allows; inside that window, polls come every max(pollFloor, e/100), and
// each poll past the latest end the window's first reading allowed
// (e·100/p) that still finds the job running doubles that step, so a job
// stuck at 99% costs a handful of polls, not hundreds. A poll before that
// latest end misses nothing the progress promised: a job read at 98% and
// then at 99% is stepped through, not backed off from, since its end may
// be a step away. A job that reports
// no progress is polled at PollMin, doubling with its run time. PollMax
// bounds every wait.
//
// Waits short enough are waited inside the job's execution (see follow): a
// River snooze costs up to a fetch interval on top of the wait, which for
// the last poll of a short job is most of the gap being closed.

// The first poll. A job that reports progress is polled first to read
// it, then at the end its progress allows; one that does not, at a
// doubling interval. The jobs its platform model ran last say more:
// each ran at least from its submit to the last poll that found it
// running, and the next is likely to run about as long as the shortest
// of them. So once a platform model has run learnFrom jobs, the first
// poll of its next is at nine tenths of the shortest of its last
// recentJobs (within PollMin and PollMax of the submit), where a short
// job's first poll came at PollMin, read a few percent, and told nothing
// the later polls do not. A job whose first poll finds it ended may be
// shorter than that: it counts as of no known length, and the first
// polls are at PollMin again until it is no longer among the last.

// recentJobs is how many of a platform model's last jobs its first poll
// is learnt from; learnFrom is how many it takes.
const (
	recentJobs = 16
	learnFrom  = 4
)

// jobLengths are the least lengths of each platform model's last jobs.
type jobLengths struct {
	mu sync.Mutex
	m  map[string]*recentLengths
}

// recentLengths is a ring of a platform model's last recentJobs
// lengths; n counts those recorded.
type recentLengths struct {
	at [recentJobs]time.Duration
	n  int
}

// record records a job of platform model pm that ran at least d.
func (l *jobLengths) record(pm string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[string]*recentLengths)
	}
	r := l.m[pm]
	if r == nil {
		r = new(recentLengths)
		l.m[pm] = r
	}
	r.at[r.n%recentJobs] = d
	r.n++
}

// shortest is the shortest of pm's last jobs; false until it has run
// learnFrom.
func (l *jobLengths) shortest(pm string) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.m[pm]
	if r == nil || r.n < learnFrom {
		return 0, false
	}
	d := r.at[0]
	for _, x := range r.at[1:min(r.n, recentJobs)] {
		d = min(d, x)
	}
	return d, true
}

// firstPoll is how long after its submit a job of platform model pm is
// first polled.
func (s *Service) firstPoll(pm string) time.Duration {
	d, ok := s.lengths.shortest(pm)
	if !ok {
		return s.cfg.PollMin
	}
	return min(max(d-d/10, s.cfg.PollMin), s.cfg.PollMax)
}

// learnLength records the length of run r's job, of platform model pm,
// which a poll found ended: at least until the last poll that found it
// running, if one did; else not known.
func (s *Service) learnLength(pm string, r *run) {
	if !r.learns {
		return
	}
	var d time.Duration
	if !r.running.IsZero() {
		d = r.running.Sub(r.started)
	}
	s.lengths.record(pm, d)
}

// pollFloor is the shortest wait between two polls of one job.
const pollFloor = 20 * time.Millisecond

// pollOutage is how long polls of a running job may keep failing with an
// upstream's trouble (5xx, 429, unreachable, timeouts) before the
// failures count as the task's: until then the job is polled again with
// a doubling wait, and River's attempts — which end in a failed task and
// a cancelled upstream job — are not spent. An upstream's outage of a
// few minutes must not throw away the jobs it is running.
const pollOutage = 30 * time.Minute

// pollFailed decides whether a failed poll is waited out: it returns the
// wait before the next poll, or false if the failure is the task's (the
// job is gone, the request was refused) or the outage lasted too long.
func (s *Service) pollFailed(ctx context.Context, t weir.Task, r *run, err error, now time.Time) (time.Duration, bool) {
	var pe *provider.Error
	if ctx.Err() != nil || !errors.As(err, &pe) || !pe.Retryable() {
		return 0, false
	}
	if r.failingSince.IsZero() {
		r.failingSince = now
		s.logger.Warn("polls of a running task failing; polling on", "task", t.ID, "platform_model", t.PlatformModel, "error", err)
	}
	if now.Sub(r.failingSince) >= pollOutage {
		return 0, false
	}
	wait := min(s.cfg.PollMin<<min(r.failures, 16), time.Minute)
	r.failures++
	return max(wait, pe.RetryAfter), true
}

// nextPoll is the wait after a poll sent at now found a job submitted at
// r.started running with progress (0 to 100), given the polls before it
// that missed its end (r.misses and r.latest, which it updates).
func (s *Service) nextPoll(r *run, progress int, now time.Time) time.Duration {
	elapsed := now.Sub(r.started)
	if progress <= 0 || progress >= 100 || elapsed <= 0 {
		r.misses, r.latest = 0, time.Time{}
		return s.backoff(elapsed)
	}
	// The job ends between elapsed·100/(progress+1) and elapsed·100/progress.
	earliest := time.Duration(float64(elapsed) * 100 / float64(progress+1))
	wait := earliest - elapsed
	if wait >= pollFloor {
		r.misses, r.latest = 0, time.Time{}
		return min(wait, s.cfg.PollMax)
	}
	// Inside the window: step through it, slower each time a poll past
	// the latest end its first reading allowed finds the job running.
	switch {
	case r.latest.IsZero():
		r.latest = r.started.Add(time.Duration(float64(elapsed) * 100 / float64(progress)))
		r.misses = 0
	case !now.Before(r.latest):
		r.misses++
	}
	wait = max(pollFloor, elapsed/100) << min(r.misses, 16)
	return min(wait, s.cfg.PollMax)
}

// backoff is the wait between polls of a job that reports no progress: it
// doubles from PollMin with the time the job has run, up to PollMax.
func (s *Service) backoff(ran time.Duration) time.Duration {
	d := s.cfg.PollMin
	for d < s.cfg.PollMax && ran > 4*d {
		d *= 2
	}
	return min(d, s.cfg.PollMax)
}
