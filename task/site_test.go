package task

import (
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider/mock"
)

var _ SiteTargeter = (*testPlanner)(nil)

// TargetAt is Target while pm is still on site, else the target kept
// for site (keepSite), as the gateway answers.
func (p *testPlanner) TargetAt(pm string, mode weir.RunMode, site string) (Target, bool) {
	if tg, ok := p.Target(pm, mode); ok && tg.Site == site {
		return tg, true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	tg, ok := p.sites[site]
	return tg, ok
}

// keepSite keeps platform model pm's target as it is now for TargetAt
// to find by its site, Retired, once pm points elsewhere or has left the
// catalog; unscoped: pm has no scope (a process that never knew it).
func (p *testPlanner) keepSite(pm string, unscoped bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	tg := p.targets[pm]
	tg.Retired, tg.Unscoped = true, unscoped
	if p.sites == nil {
		p.sites = map[string]Target{}
	}
	p.sites[tg.Site] = tg
}

// repoint points platform model pm at to's platform: pm's target is
// to's, under pm's name.
func (p *testPlanner) repoint(pm, to string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	tg := p.targets[to]
	tg.PlatformModel = pm
	p.targets[pm] = tg
}

// TestRepointedFollowedWhereSubmitted: a task running upstream on a
// platform model that a reload points at another platform is followed
// (polled, cancelled) on the platform its job was submitted to, which
// the new one does not know; a task submitted after the reload runs on
// the new platform.
func TestRepointedFollowedWhereSubmitted(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: time.Minute}, "vid/b": {JobDuration: time.Hour}},
		Models: map[string][]string{"sora-2": {"vid/a"}}})
	done := b.submit(t, s, nil)
	running := b.driveTo(t, done.ID, weir.TaskRunning)
	if running.UpstreamSite != "site-vid/a" {
		t.Fatalf("task running with site %q; want site-vid/a recorded at submit", running.UpstreamSite)
	}
	cancelled := b.submit(t, s, nil)
	b.driveTo(t, cancelled.ID, weir.TaskRunning)
	b.planner.keepSite("vid/a", false)
	b.planner.repoint("vid/a", "vid/b")

	if _, err := s.Cancel(t.Context(), cancelled.ID); err != nil {
		t.Fatal(err)
	}
	if st := b.up["vid/a"].srv.Stats(); st.JobsCancelled != 1 {
		t.Errorf("vid/a's old platform: %d jobs cancelled; want the cancelled task's", st.JobsCancelled)
	}
	got := b.driveTo(t, done.ID, weir.TaskSucceeded, weir.TaskFailed)
	if got.Status != weir.TaskSucceeded || got.UpstreamID != running.UpstreamID {
		t.Errorf("task %s, job %s (%s: %s); want succeeded, its job %s followed on the old platform", got.Status, got.UpstreamID,
			got.ErrorCode, got.ErrorMessage, running.UpstreamID)
	}
	if polls := b.up["vid/b"].srv.Stats().JobPolls; polls != 0 {
		t.Errorf("the new platform polled %d times for the old platform's jobs; want none", polls)
	}

	after := b.submit(t, s, nil)
	got = b.driveTo(t, after.ID, weir.TaskRunning)
	if got.UpstreamSite != "site-vid/b" || len(b.up["vid/b"].jobKeys()) != 1 {
		t.Errorf("a task submitted after the repoint runs on site %q, new platform's jobs %v; want it there", got.UpstreamSite, b.up["vid/b"].jobKeys())
	}
}

// TestRecoverFollowsOnTheSubmittedSite: after a restart, a running task
// whose platform model left the catalog while the service was down is
// followed to its end on the platform its job was submitted to, which
// the catalog still has, without a lease (its platform model has no
// scope to hold one in), and its job is not submitted again.
func TestRecoverFollowsOnTheSubmittedSite(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: time.Minute}, "vid/b": {}}})
	tk := b.submit(t, s, nil)
	running := b.driveTo(t, tk.ID, weir.TaskRunning)
	if err := s.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.planner.keepSite("vid/a", true)
	b.planner.drop("vid/a")
	s2 := b.newService(t)
	b.start(t, s2)
	got := b.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed)
	if got.Status != weir.TaskSucceeded || got.UpstreamID != running.UpstreamID {
		t.Fatalf("task %s, job %s (%s: %s); want succeeded, its job %s followed", got.Status, got.UpstreamID,
			got.ErrorCode, got.ErrorMessage, running.UpstreamID)
	}
	if j := b.up["vid/a"].jobByKey(t, tk.ID); j.Submits != 1 {
		t.Errorf("upstream job submitted %d times, want once", j.Submits)
	}
	b.waitReleased(t)
}
