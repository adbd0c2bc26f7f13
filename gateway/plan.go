package gateway

import (
	"context"
	"fmt"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/provider"
	"github.com/weir-gateway/weir/task"
)

// taskCandidates are the admission candidates of a task of key
// (counted against group) in run mode mode for the platform models pms,
// in their order: each needs the key's, the group's and the platform
// model's scope (in the acceptance run mode, its acceptance copy), one of
// each. The task service adds its workers' scopes.
func taskCandidates(keyID, group string, mode weir.RunMode, pms []string) []admission.Candidate {
	cands := make([]admission.Candidate, len(pms))
	for i, pm := range pms {
		cands[i] = admission.Candidate{
			Needs: append(tenantNeeds(keyID, group), admission.Need{Scope: pmScopeFor(mode, pm), Amount: 1}),
		}
	}
	return cands
}

// tenantNeeds are what every candidate needs of its request's tenant:
// one of the key's scope and one of the group's, with room for the
// target's own.
func tenantNeeds(keyID, group string) []admission.Need {
	return append(make([]admission.Need, 0, 4),
		admission.Need{Scope: scopeNames.get(keyScopeKind, keyID), Amount: 1},
		admission.Need{Scope: scopeNames.get(groupScopeKind, group), Amount: 1})
}

var _ task.Starter = (*Service)(nil)

// Plan implements task.Planner: a task's candidates are its model's
// platform models that have an asynchronous API, in the router's order.
// A task admitted to, or running on, a platform model that left the
// catalog and is kept for it is planned there alone (planOnLeft).
func (s *Service) Plan(ctx context.Context, t weir.Task) ([]admission.Candidate, error) {
	st := s.state.Load()
	if st == nil {
		return nil, errNoCatalog
	}
	if t.Status == weir.TaskAdmitted || t.Status == weir.TaskRunning {
		if from, _ := s.leftCatalog(t.PlatformModel); from != nil {
			return s.planOnLeft(ctx, st, t)
		}
	}
	model, ok := st.models[t.Model]
	if !ok || !Taskable(model.Kind) {
		return nil, fmt.Errorf("%w: model %q serves no tasks", admission.ErrNoCandidate, t.Model)
	}
	key, err := s.taskKey(ctx, t)
	if err != nil {
		return nil, err
	}
	group, _ := st.GroupOf(key)
	var pms []string
	routed := s.deps.Router.Order(model)
	order, refusal := servable(st, model, weir.TaskWants(t.Input), nil, routed)
	s.countSkipped(model, routed, order)
	for _, pmName := range order {
		if _, ok := st.target(pmName); ok {
			pms = append(pms, pmName)
		}
	}
	if len(pms) == 0 && refusal != nil {
		return nil, fmt.Errorf("%w: %s", admission.ErrNoCandidate, refusal.Message)
	}
	if len(pms) == 0 {
		return nil, fmt.Errorf("%w: model %q has no platform to run on", admission.ErrNoCandidate, t.Model)
	}
	if key := taskAffinityKey(model, t); key != "" {
		if prefer, ok := s.affinity.get(key, s.deps.Clock.Now()); ok {
			pms = preferFirst(pms, prefer)
		}
	}
	if t.RunMode == weir.RunAcceptance {
		// Not EnterRun: the run was entered when the task was submitted,
		// and a task queued again is not refused by the caps on runs.
		if err := s.ensureAcceptanceScopes(ctx, pms); err != nil {
			return nil, err
		}
	}
	cands := taskCandidates(key.ID, group, t.RunMode, pms)
	// A task names no end user: budgets of end users do not count it.
	budgets, err := s.prepareBudgets(ctx, key.ID, group, model.Name, "", pms)
	if err != nil {
		return nil, err
	}
	if t.RunMode != weir.RunSimulation {
		wants := weir.TaskWants(t.Input)
		for i, pm := range pms {
			if budgets.budgeted(pm) {
				cands[i].Needs = append(cands[i].Needs, budgets.needs(pm)...)
				cands[i].Cost = int64(st.pms[pm].Estimate(wants, model.Kind))
			}
		}
	}
	return cands, nil
}

// taskKey is task t's key, its scope configured.
func (s *Service) taskKey(ctx context.Context, t weir.Task) (weir.APIKey, error) {
	key, found, err := s.keyByID(ctx, t.KeyID)
	if err == nil && !found {
		err = weir.ErrNotFound
	}
	if err != nil {
		return key, fmt.Errorf("task %s: key %s: %w", t.ID, t.KeyID, err)
	}
	return key, s.EnsureKeyScope(ctx, key)
}

// planOnLeft plans task t, admitted to or running on t.PlatformModel, a
// platform model the catalog st left that is kept for the work on it
// (retire.go): its one candidate needs that platform model's scope and
// its tenant's, so that a fleet's next leader restores its lease there
// and the platform model is not retired under it. The candidate needs no
// budget: the budgets' reservation of the task's admission is not made
// again.
func (s *Service) planOnLeft(ctx context.Context, st *Snapshot, t weir.Task) ([]admission.Candidate, error) {
	key, err := s.taskKey(ctx, t)
	if err != nil {
		return nil, err
	}
	group, _ := st.GroupOf(key)
	return taskCandidates(key.ID, group, t.RunMode, []string{t.PlatformModel}), nil
}

// countSkipped counts the candidates of model a task was planned
// without (Metrics.TaskCandidateSkipped): those the router left out,
// cooling down after failures; those of routed that cannot serve its
// input (capability; order are the others); and those of order whose
// upstream asked for a pause, where the task may wait.
func (s *Service) countSkipped(model weir.Model, routed, order []string) {
	m := s.deps.Metrics
	for range len(model.Candidates) - len(routed) {
		m.TaskCandidateSkipped("cooldown")
	}
	for range len(routed) - len(order) {
		m.TaskCandidateSkipped("capability")
	}
	for _, pm := range order {
		if _, paused := s.pausedUntil(pm); paused {
			m.TaskCandidateSkipped("paused")
		}
	}
}

// Target implements task.Planner. A simulated task's target is the
// platform model's simulator. A platform model the catalog left whose
// scope waits for RetireLeft (Config.RetireLater) has the target it had
// in the last catalog that had it: a fleet's leader that has not taken
// this catalog yet still admits tasks to it, and their jobs may run
// here. So has one held for the leases on its scope once its removal is
// complete, marked Retired: the tasks started on it follow their jobs
// there to the end (retire.go).
func (s *Service) Target(pmName string, mode weir.RunMode) (task.Target, bool) {
	st := s.state.Load()
	if st == nil {
		return task.Target{}, false
	}
	retired := false
	if _, ok := st.pms[pmName]; !ok {
		var from *Snapshot
		if from, retired = s.leftCatalog(pmName); from != nil {
			st = from
		}
	}
	t, ok := st.target(pmName)
	t.Retired = ok && retired
	if ok && mode == weir.RunSimulation {
		t.Adapter, t.Simulated, t.Site = st.asyncSims[pmName], true, ""
		if job, sync := syncJob(st.taskKinds[pmName], st.sims[pmName]); sync {
			t.Adapter = job
		}
	}
	return t, ok
}

// syncTaskPaths are the endpoints of the kinds whose tasks are calls
// their upstream answers at once (provider.SyncJob): the task's input
// is the call's body, its result the answer. A transcription's input
// holds its file (provider.TaskFile) and is sent as the form the
// endpoint takes.
var syncTaskPaths = map[weir.ModelKind]string{
	weir.KindChat:          "/chat/completions",
	weir.KindEmbeddings:    "/embeddings",
	weir.KindImages:        "/images/generations",
	weir.KindSpeech:        "/audio/speech",
	weir.KindTranscription: "/audio/transcriptions",
}

// newTaskKinds are the kinds whose tasks a build older than this one's
// features would run wrongly, by the River queue their jobs run from
// (task.QueueRunV2): no older replica of a fleet being upgraded takes
// them.
var newTaskKinds = map[weir.ModelKind]string{
	weir.KindTranscription: task.QueueRunV2,
}

// JobQueue implements task.Queuer.
func (s *Service) JobQueue(pmName string) string {
	st := s.state.Load()
	if st == nil {
		return ""
	}
	return newTaskKinds[st.taskKinds[pmName]]
}

// syncJob is the job that runs a task of kind k on ad, if k's tasks are
// calls answered at once (syncTaskPaths).
func syncJob(k weir.ModelKind, ad provider.Adapter) (provider.SyncJob, bool) {
	path, ok := syncTaskPaths[k]
	return provider.SyncJob{Adapter: ad, Path: path, Form: k == weir.KindTranscription}, ok
}

// Taskable reports whether models of kind k may run as durable tasks
// (POST /v1/tasks): video, which runs only so, and the kinds of
// syncTaskPaths.
func Taskable(k weir.ModelKind) bool {
	_, sync := syncTaskPaths[k]
	return sync || k.Async()
}

// UpstreamResult implements task.HealthReporter: a task's calls count
// toward the platform model's cooldown as the gateway's requests do.
func (s *Service) UpstreamResult(pmName string, ok bool) {
	if ok {
		s.deps.Router.Success(pmName)
	} else {
		s.deps.Router.Failure(pmName)
	}
}

func (st *Snapshot) target(pmName string) (task.Target, bool) {
	pm, ok := st.pms[pmName]
	if !ok {
		return task.Target{}, false
	}
	if job, sync := syncJob(st.taskKinds[pmName], st.adapters[pm.Platform]); sync {
		if job.Adapter == nil {
			return task.Target{}, false
		}
		return task.Target{PlatformModel: pm.Name, Upstream: pm.Upstream, Adapter: job, Site: st.built[pm.Platform].site}, true
	}
	ad, ok := st.async[pm.Platform]
	if !ok {
		return task.Target{}, false
	}
	return task.Target{PlatformModel: pm.Name, Upstream: pm.Upstream, Adapter: ad, Site: st.built[pm.Platform].site}, true
}

var (
	_ task.Planner        = (*Service)(nil)
	_ task.SiteTargeter   = (*Service)(nil)
	_ task.Queuer         = (*Service)(nil)
	_ task.HealthReporter = (*Service)(nil)
	_ task.Pauser         = (*Service)(nil)
)

// unservable is the refusal of a task for model m with input that none
// of its platform models can serve (their Supports); nil if one can.
func (s *Service) unservable(m weir.Model, input []byte) error {
	st := s.state.Load()
	if st == nil {
		return nil
	}
	if pms, refusal := s.order(st, m, weir.TaskWants(input), nil, ""); len(pms) == 0 && refusal != nil {
		return refusal
	}
	return nil
}
