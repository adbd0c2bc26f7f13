package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/provider"
)

// Snapshot is one catalog, resolved for lookups. It is replaced whole on
// reload, so a request that holds one sees one consistent catalog from
// start to end.
type Snapshot struct {
	models     map[string]weir.Model
	modelNames []string // sorted
	pms        map[string]weir.PlatformModel
	// pmTokenizers are the platform models' encodings (tokenizer), by
	// platform model.
	pmTokenizers map[string]pmTokenizer
	// upstreams are what a call to each platform model is sent to
	// (pmUpstream), by platform model.
	upstreams map[string]*upstream
	groups    map[string]weir.Group
	// keyGroups is the catalog of groups a key may name: the catalog's,
	// the default among them.
	keyGroups weir.Catalog
	adapters  map[string]provider.Adapter
	// responses are the platforms that speak the Responses API
	// (weir.Platform.SpeaksResponses).
	responses map[string]bool
	// messages are the platforms that speak Anthropic's Messages API
	// (weir.Platform.SpeaksMessages).
	messages map[string]bool
	// kinds are the platforms' kinds, by platform (weir.TokenizerOf).
	kinds map[string]string
	// sims and asyncSims answer the simulation run mode, by platform
	// model: its requests and its tasks.
	sims      map[string]provider.Adapter
	asyncSims map[string]provider.AsyncAdapter
	async     map[string]provider.AsyncAdapter
	// taskKinds is the kind of the models each platform model serves,
	// which decides how it runs a task (target); video where one of
	// them is.
	taskKinds    map[string]weir.ModelKind
	defaultGroup string
	// budgets are the catalog's (its config file's) budgets.
	budgets []weir.Budget
	// built are the adapters each platform's configuration made, by
	// platform: a reload reuses those of a platform whose configuration
	// is the same (platformAdapters).
	built map[string]builtAdapters

	// callTimeouts bounds each platform's calls, by platform: its
	// call_timeout or the server's (not positive: no bound).
	callTimeouts map[string]time.Duration
}

// Snapshot is the catalog being served; nil before the first Apply.
func (s *Service) Snapshot() *Snapshot { return s.state.Load() }

// errNoCatalog: no catalog has been applied yet.
var errNoCatalog = errors.New("no catalog applied")

// Ready reports whether the service has a catalog to serve by (an error
// saying so if not).
func (s *Service) Ready() error {
	if s.state.Load() == nil {
		return errNoCatalog
	}
	return nil
}

// Models are the names of the served models k may use, sorted; none
// before a catalog is applied.
func (s *Service) Models(k weir.APIKey) []string {
	st := s.state.Load()
	if st == nil {
		return nil
	}
	var out []string
	for _, name := range st.modelNames {
		if k.Allows(name) {
			out = append(out, name)
		}
	}
	return out
}

// Model is the public model name, if the catalog has it.
func (st *Snapshot) Model(name string) (weir.Model, bool) {
	m, ok := st.models[name]
	return m, ok
}

// ModelNames are the catalog's public model names, sorted. The caller
// must not change the slice.
func (st *Snapshot) ModelNames() []string { return st.modelNames }

// GroupOf is the group a key's requests count against: its own, or the
// default when it has none or its group left the catalog.
func (st *Snapshot) GroupOf(k weir.APIKey) (string, weir.Group) { return st.groupOf(&k) }

// groupOf is GroupOf of *k. Not inlined: its map's values would take
// room in Prepare's frames.
//
//go:noinline
func (st *Snapshot) groupOf(k *weir.APIKey) (string, weir.Group) {
	if g, ok := st.groups[k.Group]; ok && k.Group != "" {
		return k.Group, g
	}
	return st.defaultGroup, st.groups[st.defaultGroup]
}

// CheckKeyGroup refuses a new key's group that the served catalog has
// not (weir.Catalog.CheckKeyGroup); the default group is always there.
func (st *Snapshot) CheckKeyGroup(name string) error {
	return st.keyGroups.CheckKeyGroup(name)
}

// PlatformModel is the platform model name, if the catalog has it.
func (st *Snapshot) PlatformModel(name string) (weir.PlatformModel, bool) {
	pm, ok := st.pms[name]
	return pm, ok
}

// Serves reports whether model m has a candidate on platform.
func (st *Snapshot) Serves(m weir.Model, platform string) bool {
	for _, c := range m.Candidates {
		if pm, ok := st.pms[c.PlatformModel]; ok && pm.Platform == platform {
			return true
		}
	}
	return false
}

// SpeaksResponses reports whether the platform name is sent Responses
// requests as they came (weir.Platform.SpeaksResponses).
func (st *Snapshot) SpeaksResponses(platform string) bool { return st.responses[platform] }

// speaks reports whether the platform name is sent requests of api as
// they came.
func (st *Snapshot) speaks(platform string, api NativeAPI) bool {
	switch api {
	case APIResponses:
		return st.responses[platform]
	case APIMessages:
		return st.messages[platform]
	}
	return false
}

// Adapter is the adapter of the platform name (nil if there is none).
func (st *Snapshot) Adapter(platform string) provider.Adapter { return st.adapters[platform] }

// providerName is the GenAI conventions' name of platform's provider,
// by its kind (GenAIOp).
func (st *Snapshot) providerName(platform string) string {
	kind := st.built[platform].cfg.Kind
	if n, ok := providerNames[kind]; ok {
		return n
	}
	return cmp.Or(kind, "openai") // kind's default
}

// The engine's settings for the scopes the catalog makes, each from its
// entity's weir.Limits: this is the one place where the domain's limits
// become the engine's (admission knows no catalog). Each request needs one
// of each.

// scopeConfig is the settings every scope takes from its limits.
func scopeConfig(l weir.Limits) admission.ScopeConfig {
	return admission.ScopeConfig{
		Limit:          l.Concurrency,
		QueueLimit:     l.QueueLimit,
		MaxWait:        l.MaxWait,
		FairnessWindow: l.FairnessWindow,
		RPM:            l.RPM,
		TPM:            l.TPM,
		Shadow:         l.Shadow,
	}
}

// platformModelScopeConfig: a platform model is where tenants meet, so
// keys of the same priority take turns there (FIFO within a key), and one
// key with a thousand queued requests does not stall everyone else. Its
// lease TTL reclaims the slots of work that died unseen.
func platformModelScopeConfig(pm weir.PlatformModel) admission.ScopeConfig {
	cfg := scopeConfig(pm.Limits)
	cfg.LeaseTTL = pm.LeaseTTL
	cfg.RoundRobin = true
	cfg.FailOpen = pm.FailOpen
	return cfg
}

// groupScopeConfig: a group's keys take turns if it says so. It holds its
// slots until the request ends (no lease TTL). Platform models and groups
// fail open as they say.
func groupScopeConfig(g weir.Group) admission.ScopeConfig {
	cfg := scopeConfig(g.Limits)
	cfg.RoundRobin = g.RoundRobin
	cfg.FailOpen = g.FailOpen
	return cfg
}

// keyScopeConfig: a key's scope holds its slots until the request ends
// (no lease TTL). It fails closed: a key with limits is admitted nowhere
// while a fleet reaches no leader (one without has nothing to exceed).
func keyScopeConfig(k weir.APIKey) admission.ScopeConfig {
	return scopeConfig(k.Limits)
}

// groupConfig is g's scope configuration with its run-time limit, if
// one is set (operator.go).
func (s *Service) groupConfig(g weir.Group) admission.ScopeConfig {
	cfg := groupScopeConfig(g)
	s.ops.applyTo(weir.GroupScope(g.Name), "", &cfg)
	return cfg
}

// keyConfig is k's scope configuration with its run-time limit, if one
// is set.
func (s *Service) keyConfig(k weir.APIKey) admission.ScopeConfig {
	cfg := keyScopeConfig(k)
	s.ops.applyTo(weir.KeyScope(k.ID), "", &cfg)
	return cfg
}

// Apply makes cat the served catalog: it configures the scopes of its
// platform models and groups (a lowered limit stops admissions until usage
// is below it; nothing in flight is revoked), retires scopes that left the
// catalog, builds the platforms' adapters, and swaps the lookup state in
// one step. It applies the config's limits: the run-time limits go, for
// every replica; drains and pauses are kept (operator.go). A store that
// cannot be reached fails it before the catalog changed.
func (s *Service) Apply(ctx context.Context, cat weir.Catalog, defaultGroup string) error {
	return s.apply(ctx, cat, defaultGroup, true)
}

// Take is Apply keeping the run-time limits: a fleet replica taking the
// catalog version another published, or starting on the fleet's, leaves
// them to the publication (which forgets them: weir.CatalogPublishParams).
func (s *Service) Take(ctx context.Context, cat weir.Catalog, defaultGroup string) error {
	return s.apply(ctx, cat, defaultGroup, false)
}

func (s *Service) apply(ctx context.Context, cat weir.Catalog, defaultGroup string, forgetLimits bool) error {
	if err := cat.Validate(); err != nil {
		return err
	}
	if defaultGroup == "" {
		defaultGroup = "default"
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if forgetLimits {
		if _, err := s.deps.Overrides.OverrideDelete(ctx, &weir.OverrideDeleteParams{Kind: weir.OverrideLimit}); err != nil {
			return fmt.Errorf("%w: forget the run-time limits: %w", ErrUnavailable, err)
		}
	}
	changed, err := s.readOverridesLocked(ctx)
	if err != nil {
		return err // the next read sets again what the limits' going changed
	}
	// Tidying: a pause whose every replica went away before it ended.
	if _, err := s.deps.Overrides.OverrideDelete(ctx, &weir.OverrideDeleteParams{Kind: weir.OverridePause, EndedBy: s.deps.Clock.Now()}); err != nil {
		s.deps.Logger.Warn("could not clear the ended pauses from the store", "error", err)
	}
	next := &Snapshot{
		models:       make(map[string]weir.Model, len(cat.Models)),
		pms:          make(map[string]weir.PlatformModel, len(cat.PlatformModels)),
		groups:       make(map[string]weir.Group, len(cat.Groups)+1),
		adapters:     make(map[string]provider.Adapter, len(cat.Platforms)),
		responses:    make(map[string]bool, len(cat.Platforms)),
		messages:     make(map[string]bool, len(cat.Platforms)),
		kinds:        make(map[string]string, len(cat.Platforms)),
		sims:         make(map[string]provider.Adapter, len(cat.PlatformModels)),
		asyncSims:    make(map[string]provider.AsyncAdapter, len(cat.PlatformModels)),
		async:        make(map[string]provider.AsyncAdapter, len(cat.Platforms)),
		taskKinds:    make(map[string]weir.ModelKind, len(cat.PlatformModels)),
		defaultGroup: defaultGroup,
		budgets:      cat.Budgets,
		callTimeouts: make(map[string]time.Duration, len(cat.Platforms)),
		built:        make(map[string]builtAdapters, len(cat.Platforms)),
	}
	if err := s.platformAdapters(next, s.state.Load(), cat.Platforms); err != nil {
		return err
	}
	for _, m := range cat.Models {
		next.models[m.Name] = m
		next.modelNames = append(next.modelNames, m.Name)
		for _, cd := range m.Candidates {
			if next.taskKinds[cd.PlatformModel] != weir.KindVideo {
				next.taskKinds[cd.PlatformModel] = m.Kind
			}
		}
	}
	slices.Sort(next.modelNames)
	next.pmTokenizers = make(map[string]pmTokenizer, len(cat.PlatformModels))
	next.upstreams = make(map[string]*upstream, len(cat.PlatformModels))
	for _, pm := range cat.PlatformModels {
		next.pms[pm.Name] = pm
		next.pmTokenizers[pm.Name] = newPMTokenizer(pm, next.kinds[pm.Platform])
		up := pmUpstream(next, pm)
		next.upstreams[pm.Name] = &up
		next.sims[pm.Name], next.asyncSims[pm.Name] = s.simulator(pm)
	}
	for _, g := range cat.Groups {
		next.groups[g.Name] = g
	}
	if _, ok := next.groups[defaultGroup]; !ok {
		next.groups[defaultGroup] = weir.Group{Name: defaultGroup}
	}
	for _, g := range next.groups {
		next.keyGroups.Groups = append(next.keyGroups.Groups, g)
	}
	if err := s.setScopesLocked(ctx, next); err != nil {
		return err
	}
	prev := s.state.Load()
	s.keepMovedLocked(ctx, prev, next)
	s.keepLeftLocked(prev, next)
	s.state.Store(next)
	// The requests waiting move before the scopes they leave go, so that
	// none fails for want of a candidate the new catalog has.
	if moved := s.moveWaitsLocked(next); moved > 0 {
		s.deps.Logger.Info("waiting requests moved to the new catalog's platform models", "moved", moved)
	}
	s.retireScopesLocked(ctx, prev, next)
	// The keys' scopes whose run-time limit went (the catalog's were set
	// above).
	for scope := range changed {
		if !strings.HasPrefix(scope, weir.KeyScope("")) {
			delete(changed, scope)
		}
	}
	s.reconfigureLocked(ctx, changed)
	if err := s.reloadBudgetsLocked(ctx); err != nil {
		// The store's budgets are read again on the next poll.
		s.deps.Logger.Warn("could not read the budgets", "error", err)
	}
	return nil
}

// setScopesLocked configures the scopes of next's platform models and
// groups. The caller holds applyMu.
func (s *Service) setScopesLocked(ctx context.Context, next *Snapshot) error {
	for _, pm := range next.pms {
		if err := s.deps.Engine.SetScope(ctx, weir.PlatformModelScope(pm.Name), s.pmScopeConfig(pm)); err != nil {
			return fmt.Errorf("platform model %s: %w", pm.Name, err)
		}
		if err := s.setAcceptanceScopeLocked(ctx, pm); err != nil {
			return fmt.Errorf("platform model %s's acceptance copy: %w", pm.Name, err)
		}
	}
	for _, g := range next.groups {
		if err := s.deps.Engine.SetScope(ctx, weir.GroupScope(g.Name), s.groupConfig(g)); err != nil {
			return fmt.Errorf("group %s: %w", g.Name, err)
		}
	}
	return nil
}

// retireScopesLocked retires the scopes of prev's platform models and
// groups that next has not, holds those of platform models that still
// hold leases (retire.go), or leaves them to RetireLeft
// (Config.RetireLater). The caller holds applyMu.
func (s *Service) retireScopesLocked(ctx context.Context, prev, next *Snapshot) {
	if prev == nil {
		return
	}
	for name := range prev.pms {
		if _, ok := next.pms[name]; !ok {
			s.retirePlatformModelLocked(ctx, name, prev)
		}
	}
	for name := range prev.groups {
		if _, ok := next.groups[name]; !ok {
			s.retireGroupLocked(ctx, name)
		}
	}
}

// builtAdapters are the adapters made of one platform's configuration.
// The configuration is kept without the service's own client and clock,
// which are the same for every reload (and need not be comparable).
type builtAdapters struct {
	cfg provider.Platform
	a   provider.Adapters
	// host is where its calls go: serverAddress(cfg).
	host string
	// site is who and where its calls go: siteOf(cfg).
	site string
}

// platformAdapters builds each platform's adapters, by its kind, with
// the gateway's bounds where the platform sets none. A platform whose
// configuration is the same as in prev (the catalog served until now)
// keeps its adapters: a reload then costs it no new Entra token, no new
// AWS client, and none of its kept-alive connections.
func (s *Service) platformAdapters(next, prev *Snapshot, platforms []weir.Platform) error {
	orDefault := func(d, def time.Duration) time.Duration {
		if d > 0 {
			return d
		}
		return def
	}
	for _, p := range platforms {
		total := orDefault(p.CallTimeout, s.cfg.UpstreamCallTimeout)
		cfg := provider.Platform{Kind: p.Kind, BaseURL: p.BaseURL, APIKey: p.APIKey,
			Timeout: orDefault(p.Timeout, s.cfg.UpstreamTimeout), IdleTimeout: orDefault(p.IdleTimeout, s.cfg.UpstreamIdleTimeout),
			CallTimeout: total, APIVersion: p.APIVersion,
			Region: p.Region, AccessKeyID: p.AccessKeyID, SecretAccessKey: p.SecretAccessKey, SessionToken: p.SessionToken,
			TenantID: p.TenantID, ClientID: p.ClientID, ClientSecret: p.ClientSecret, TokenURL: p.TokenURL}
		b, ok := builtAdapters{}, false
		if prev != nil {
			b, ok = prev.built[p.Name]
		}
		if !ok || b.cfg != cfg {
			with := cfg
			with.Client, with.Clock = s.deps.HTTPClient, s.deps.Clock
			a, err := s.newAdapters(with)
			if err != nil {
				return fmt.Errorf("platform %s: %w", p.Name, err)
			}
			b = builtAdapters{cfg: cfg, a: a, host: serverAddress(cfg), site: siteOf(cfg)}
		}
		next.built[p.Name] = b
		next.callTimeouts[p.Name] = total
		next.responses[p.Name] = p.SpeaksResponses()
		next.messages[p.Name] = p.SpeaksMessages()
		next.kinds[p.Name] = p.Kind
		next.adapters[p.Name], next.async[p.Name] = b.a.Sync, b.a.Async
	}
	return nil
}

// removeScope retires a scope that left the catalog. A failure leaves
// the scope configured (it admits by its old limits) but must not undo
// the reload: it is logged and counted.
func (s *Service) removeScope(ctx context.Context, scope string) {
	err := s.deps.Engine.RemoveScope(ctx, scope)
	if err != nil && !errors.Is(err, admission.ErrUnknownScope) { // unknown: retired already
		s.deps.Metrics.DroppedError("remove_scope")
		s.deps.Logger.Warn("could not retire a scope that left the catalog", "scope", scope, "error", err)
	}
}

// EnsureKeyScope configures a key's own scope the first time it is used.
func (s *Service) EnsureKeyScope(ctx context.Context, k weir.APIKey) error {
	return s.ensureKeyScope(ctx, &k)
}

// ensureKeyScope is EnsureKeyScope of *k.
func (s *Service) ensureKeyScope(ctx context.Context, k *weir.APIKey) error {
	if _, ok := s.keyScopes.Load(k.ID); ok {
		return nil
	}
	return s.setKeyScope(ctx, k)
}

// setKeyScope configures k's scope, the first time a request of k's
// arrives (EnsureKeyScope). It is a function of its own so that the
// frame of EnsureKeyScope, on every request's way to the queue, is
// small.
//
//go:noinline
func (s *Service) setKeyScope(ctx context.Context, k *weir.APIKey) error {
	if err := s.deps.Engine.SetScope(ctx, weir.KeyScope(k.ID), s.keyConfig(*k)); err != nil {
		return err
	}
	s.keyScopes.Store(k.ID, struct{}{})
	return nil
}
