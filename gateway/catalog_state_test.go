package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/provider"
)

// TestApplySetsScopes: Apply configures a scope for every platform model
// and group by its limits, the default group among them, and serves the
// catalog's models by name.
func TestApplySetsScopes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) {
		c.PlatformModels[0].Concurrency, c.PlatformModels[0].LeaseTTL = 4, time.Minute
		c.Groups = []weir.Group{{Name: "gold", Limits: weir.Limits{Concurrency: 2, RPM: 60}, RoundRobin: true}}
	}})
	if got := b.scope(t, weir.PlatformModelScope("up/m")).Config; got.Limit != 4 || got.LeaseTTL != time.Minute || !got.RoundRobin {
		t.Errorf("up/m scope %+v", got)
	}
	if got := b.scope(t, weir.GroupScope("gold")).Config; got.Limit != 2 || got.RPM != 60 || !got.RoundRobin {
		t.Errorf("gold scope %+v", got)
	}
	b.scope(t, weir.GroupScope("default"))
	st := b.svc.Snapshot()
	if names := st.ModelNames(); len(names) != 1 || names[0] != "m" {
		t.Errorf("model names %v", names)
	}
	if g, _ := st.GroupOf(weir.APIKey{Group: "gold"}); g != "gold" {
		t.Errorf("a gold key counts against %q", g)
	}
	if g, _ := st.GroupOf(weir.APIKey{Group: "gone"}); g != "default" {
		t.Errorf("a key of a group not in the catalog counts against %q", g)
	}
	var views []string
	for _, v := range b.svc.Scopes(t.Context()) {
		if v.Name == weir.PlatformModelScope("up/m") && v.Limit == 4 {
			views = append(views, v.Name)
		}
	}
	if len(views) != 1 {
		t.Errorf("Scopes shows up/m with its limit %d times", len(views))
	}
}

// TestApplySetsFailOpen: a platform model's and a group's fail_open
// reach their scopes' ScopeConfig; the others, and a key's scope, fail
// closed.
func TestApplySetsFailOpen(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) {
		c.PlatformModels[0].FailOpen = true
		c.Groups = []weir.Group{{Name: "gold", FailOpen: true}, {Name: "lead"}}
	}})
	for scope, want := range map[string]bool{
		weir.PlatformModelScope("up/m"):  true,
		weir.PlatformModelScope("up2/m"): false,
		weir.GroupScope("gold"):          true,
		weir.GroupScope("lead"):          false,
	} {
		if got := b.scope(t, scope).Config.FailOpen; got != want {
			t.Errorf("%s: FailOpen %v; want %v", scope, got, want)
		}
	}
	if got := keyScopeConfig(weir.APIKey{Limits: weir.Limits{Concurrency: 2}}); got.FailOpen {
		t.Errorf("a key's scope %+v fails open", got)
	}
}

// TestApplyRetiresScopes: a reload removes the scopes of platform models
// and groups that left the catalog, and keeps the others' settings new.
func TestApplyRetiresScopes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) {
		c.Groups = []weir.Group{{Name: "gold"}}
	}})
	next := b.catalog()
	onlyUp(&next)
	next.PlatformModels[0].Concurrency = 7
	if err := b.svc.Apply(t.Context(), next, ""); err != nil {
		t.Fatal(err)
	}
	for _, scope := range []string{weir.PlatformModelScope("up2/m"), weir.GroupScope("gold")} {
		if _, err := b.engine.Scope(t.Context(), scope); !errors.Is(err, admission.ErrUnknownScope) {
			t.Errorf("scope %s after it left the catalog: %v", scope, err)
		}
	}
	if got := b.scope(t, weir.PlatformModelScope("up/m")).Config.Limit; got != 7 {
		t.Errorf("up/m limit %d after the reload, want 7", got)
	}
	if _, ok := b.svc.Snapshot().PlatformModel("up2/m"); ok {
		t.Error("the new snapshot still has up2/m")
	}
}

// TestApplyRetiresLater: with Config.RetireLater, the scopes a catalog
// leaves stay configured, with a request still waiting on one, until
// RetireLeft; a platform model a later catalog has again is not retired,
// and one retired already elsewhere is no failure.
func TestApplyRetiresLater(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: Config{RetireLater: true}, catalog: func(c *weir.Catalog) {
		c.Groups = []weir.Group{{Name: "gold"}}
		c.PlatformModels[1].Concurrency = 1
		c.PlatformModels = append(c.PlatformModels, weir.PlatformModel{Name: "up/x", Platform: "up", Upstream: "x"})
	}})
	ctx := t.Context()
	// A request of another replica, which still serves the catalog
	// before, waits on up2/m alone.
	b.fill(t, "up2/m", 1)
	if err := b.engine.Enqueue(ctx, admission.Request{ID: "elsewhere", Candidates: []admission.Candidate{
		{Needs: []admission.Need{{Scope: weir.PlatformModelScope("up2/m"), Amount: 1}}}}}, func(admission.Lease, error) {}); err != nil {
		t.Fatal(err)
	}
	next := b.catalog()
	onlyUp(&next)
	next.PlatformModels = append(next.PlatformModels, weir.PlatformModel{Name: "up/x", Platform: "up", Upstream: "x"})
	if err := b.svc.Apply(ctx, next, ""); err != nil {
		t.Fatal(err)
	}
	if !b.svc.Leaving() {
		t.Error("nothing left to retire after a catalog left up2/m and gold")
	}
	if st := b.scope(t, weir.PlatformModelScope("up2/m")); st.Queued != 1 {
		t.Errorf("up2/m before RetireLeft: %d queued; want the other replica's request still waiting", st.Queued)
	}
	b.scope(t, weir.GroupScope("gold"))
	// A catalog with up2/m and without up/x: up2/m is the catalog's
	// again, and up/x leaves.
	again := b.catalog()
	again.PlatformModels[1].Concurrency = 1
	if err := b.svc.Apply(ctx, again, ""); err != nil {
		t.Fatal(err)
	}
	if err := b.engine.RemoveScope(ctx, weir.GroupScope("gold")); err != nil { // another replica retired it
		t.Fatal(err)
	}
	if n := b.svc.RetireLeft(ctx); n != 2 {
		t.Errorf("RetireLeft retired %d; want 2: up/x and gold, not up2/m", n)
	}
	for _, scope := range []string{weir.PlatformModelScope("up/x"), weir.GroupScope("gold")} {
		if _, err := b.engine.Scope(ctx, scope); !errors.Is(err, admission.ErrUnknownScope) {
			t.Errorf("scope %s after RetireLeft: %v; want it retired", scope, err)
		}
	}
	if st := b.scope(t, weir.PlatformModelScope("up2/m")); st.Queued != 1 {
		t.Errorf("up2/m, the catalog's again: %d queued; want the request still waiting", st.Queued)
	}
	if b.svc.Leaving() || b.metrics.count("remove_scope") != 0 {
		t.Errorf("after RetireLeft: leaving %v, remove failures %d; want none", b.svc.Leaving(), b.metrics.count("remove_scope"))
	}
}

// TestTargetKeptUntilRetireLeft: with Config.RetireLater, a platform
// model a catalog left, its platform with it, still has the target it
// had, live and simulated (a task a fleet's leader that has not taken
// the catalog admits to it meanwhile may run here), until RetireLeft,
// and again the catalog's own once a catalog has it again; without
// RetireLater it has none once the catalog left it.
func TestTargetKeptUntilRetireLeft(t *testing.T) {
	t.Parallel()
	for _, later := range []bool{false, true} {
		t.Run(fmt.Sprintf("RetireLater=%v", later), func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{cfg: Config{RetireLater: later}})
			ctx := t.Context()
			next := b.catalog()
			onlyUp(&next)
			if err := b.svc.Apply(ctx, next, ""); err != nil {
				t.Fatal(err)
			}
			for _, mode := range []weir.RunMode{"", weir.RunSimulation} {
				tg, ok := b.svc.Target("up2/m", mode)
				if ok != later || ok && (tg.PlatformModel != "up2/m" || tg.Upstream != "gpt-4o-mini" || tg.Adapter == nil || tg.Simulated != (mode == weir.RunSimulation)) {
					t.Errorf("up2/m's %q target once the catalog left it: %+v, %v; want one: %v", mode, tg, ok, later)
				}
			}
			if tg, ok := b.svc.Target("up/m", ""); !ok || tg.PlatformModel != "up/m" {
				t.Errorf("up/m's target: %+v, %v; want the catalog's", tg, ok)
			}
			b.svc.RetireLeft(ctx)
			if tg, ok := b.svc.Target("up2/m", ""); ok {
				t.Errorf("up2/m's target after RetireLeft: %+v; want none", tg)
			}
			again := b.catalog()
			again.PlatformModels[1].Upstream = "gpt-4o"
			if err := b.svc.Apply(ctx, again, ""); err != nil {
				t.Fatal(err)
			}
			if tg, ok := b.svc.Target("up2/m", ""); !ok || tg.Upstream != "gpt-4o" {
				t.Errorf("up2/m's target in a catalog that has it again: %+v, %v; want the catalog's (gpt-4o)", tg, ok)
			}
		})
	}
}

// TestApplyKeepsUnchangedAdapters: a reload builds the adapters of a
// platform whose configuration changed, and of a new one, and keeps
// those of a platform whose configuration is the same; a platform that
// comes back after it left is built anew.
func TestApplyKeepsUnchangedAdapters(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	var mu sync.Mutex
	var built []string
	b.svc.newAdapters = func(p provider.Platform) (provider.Adapters, error) {
		mu.Lock()
		built = append(built, p.APIKey)
		mu.Unlock()
		return provider.New(p)
	}
	reload := func(what string, change func(*weir.Catalog), want ...string) {
		t.Helper()
		built = nil
		cat := b.catalog()
		cat.Platforms[0].APIKey, cat.Platforms[1].APIKey = "key-up", "key-up2"
		if change != nil {
			change(&cat)
		}
		if err := b.svc.Apply(t.Context(), cat, ""); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !slices.Equal(built, want) {
			t.Errorf("%s built the adapters of %q; want %q", what, built, want)
		}
	}
	reload("the first reload with keys", nil, "key-up", "key-up2")
	up, up2 := b.svc.Snapshot().Adapter("up"), b.svc.Snapshot().Adapter("up2")
	reload("a reload of the same catalog", nil)
	if st := b.svc.Snapshot(); st.Adapter("up") != up || st.Adapter("up2") != up2 {
		t.Error("a reload that changed no platform replaced an adapter")
	}
	reload("a reload with up2's timeout changed", func(c *weir.Catalog) { c.Platforms[1].Timeout = time.Minute }, "key-up2")
	if st := b.svc.Snapshot(); st.Adapter("up") != up || st.Adapter("up2") == up2 {
		t.Error("up2's adapter was kept though its platform changed, or up's replaced though it did not")
	}
	reload("a reload without up2", onlyUp)
	reload("a reload with up2 back", func(c *weir.Catalog) { c.Platforms[1].Timeout = time.Minute }, "key-up2")
}

// TestApplyRefusesABadCatalog: a catalog that does not validate, or whose
// scopes the engine refuses, changes nothing served.
func TestApplyRefusesABadCatalog(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	before := b.svc.Snapshot()
	bad := b.catalog()
	bad.Models[0].Candidates[0].PlatformModel = "nowhere/m"
	if err := b.svc.Apply(t.Context(), bad, ""); err == nil {
		t.Error("Apply took a model over an unknown platform model")
	}
	b.engine.Close()
	if err := b.svc.Apply(t.Context(), b.catalog(), ""); err == nil {
		t.Error("Apply succeeded with the engine refusing its scopes")
	}
	if b.svc.Snapshot() != before {
		t.Error("a refused catalog replaced the served one")
	}
}

// failingRemove is an engine that cannot remove scopes.
type failingRemove struct{ admission.Engine }

func (failingRemove) RemoveScope(context.Context, string) error { return errors.New("remove refused") }

// TestApplyRemoveFailureIsCounted: a scope that cannot be retired does not
// undo the reload; it is counted and logged.
func TestApplyRemoveFailureIsCounted(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{engine: func(e admission.Engine) admission.Engine { return failingRemove{e} }})
	next := b.catalog()
	onlyUp(&next)
	if err := b.svc.Apply(t.Context(), next, ""); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.svc.Snapshot().PlatformModel("up2/m"); ok {
		t.Error("the reload was undone")
	}
	if got := b.metrics.count("remove_scope"); got != 1 {
		t.Errorf("remove failures counted %d, want 1", got)
	}
	if !strings.Contains(b.logs.String(), "remove refused") {
		t.Errorf("logs: %s", b.logs.String())
	}
}

// TestApplyKeepsInFlight: a reload that lowers a platform model's limit,
// or drops it, revokes nothing in flight: the requests running on it
// finish on the catalog they started in and give their leases back
// cleanly.
func TestApplyKeepsInFlight(t *testing.T) {
	t.Parallel()
	for _, drop := range []bool{false, true} {
		name := "lowered"
		if drop {
			name = "dropped"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{catalog: func(c *weir.Catalog) { c.PlatformModels[0].Concurrency = 2 }})
			started, finish := b.holdExec("up")
			c := b.chat(t)
			var out recordedAnswer
			done := b.serveAsync(t.Context(), c, &out)
			<-started
			next := b.catalog()
			if drop {
				next.PlatformModels = next.PlatformModels[1:]
				next.Platforms = next.Platforms[1:]
				next.Models[0].Candidates = next.Models[0].Candidates[1:]
			} else {
				next.PlatformModels[0].Concurrency = 1
			}
			if err := b.svc.Apply(t.Context(), next, ""); err != nil {
				t.Fatal(err)
			}
			if !drop {
				if st := b.scope(t, weir.PlatformModelScope("up/m")); st.Leases != 1 || st.Config.Limit != 1 {
					t.Errorf("after the reload: %+v; want the running lease kept under the new limit", st)
				}
			}
			close(finish)
			if err := <-done; err != nil || out.body.String() != okBody || c.Usage.PlatformModel != "up/m" {
				t.Fatalf("Serve: %v, body %q, usage %+v", err, out.body.String(), c.Usage)
			}
			if got := b.metrics.count("release"); got != 0 {
				t.Errorf("%d release failures", got)
			}
			b.assertIdle(t)
		})
	}
}

// TestKeyByHashCaches: a key is looked up in the store once per TTL: its
// revocation shows once the cached copy is older than the TTL, and an
// unknown key is remembered as unknown as long.
func TestKeyByHashCaches(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: Config{KeyCacheTTL: 2 * time.Second}})
	ctx := t.Context()
	if err := b.store.KeyCreate(ctx, weir.APIKey{ID: "key_a", Hash: "hash_a", CreatedAt: b.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	if k, found, err := b.svc.KeyByHash(ctx, "hash_a"); err != nil || !found || k.ID != "key_a" || !k.Active() {
		t.Fatalf("KeyByHash: %+v %v %v", k, found, err)
	}
	if err := b.store.KeyRevoke(ctx, &weir.KeyRevokeParams{ID: "key_a", At: b.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Second)
	if k, _, _ := b.svc.KeyByHash(ctx, "hash_a"); !k.Active() {
		t.Error("the store was asked again within the TTL")
	}
	b.clock.Advance(time.Second)
	if k, found, err := b.svc.KeyByHash(ctx, "hash_a"); err != nil || !found || k.Active() {
		t.Errorf("after the TTL: %+v %v %v; want the revoked key", k, found, err)
	}

	if _, found, err := b.svc.KeyByHash(ctx, "hash_b"); err != nil || found {
		t.Fatalf("unknown key: found %v, %v", found, err)
	}
	if err := b.store.KeyCreate(ctx, weir.APIKey{ID: "key_b", Hash: "hash_b", CreatedAt: b.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := b.svc.KeyByHash(ctx, "hash_b"); found {
		t.Error("an unknown key was looked up again within the TTL")
	}
	b.clock.Advance(2 * time.Second)
	if k, found, err := b.svc.KeyByHash(ctx, "hash_b"); err != nil || !found || k.ID != "key_b" {
		t.Errorf("after the TTL: %+v %v %v", k, found, err)
	}

	// A store that fails: a key cached within keyStaleIfError answers as
	// it was; one never seen, or cached too long ago, is ErrUnavailable,
	// not an unknown key.
	b.clock.Advance(time.Minute)
	_ = b.store.Close()
	if k, found, err := b.svc.KeyByHash(ctx, "hash_b"); err != nil || !found || k.ID != "key_b" {
		t.Errorf("with the store closed, a key cached a minute ago: %+v %v %v; want it served", k, found, err)
	}
	if _, found, err := b.svc.KeyByHash(ctx, "hash_c"); !errors.Is(err, ErrUnavailable) || found {
		t.Errorf("with the store closed, a key never seen: found %v, %v; want ErrUnavailable", found, err)
	}
	b.clock.Advance(keyStaleIfError)
	if _, found, err := b.svc.KeyByHash(ctx, "hash_b"); !errors.Is(err, ErrUnavailable) || found {
		t.Errorf("with the store closed, a key cached past keyStaleIfError: found %v, %v; want ErrUnavailable", found, err)
	}
}

// videoCatalog adds a video model "v" on up/v.
func videoCatalog(c *weir.Catalog) {
	c.PlatformModels = append(c.PlatformModels, weir.PlatformModel{Name: "up/v", Platform: "up", Upstream: "sora-2"})
	c.Models = append(c.Models, weir.Model{Name: "v", Kind: weir.KindVideo, Candidates: []weir.Candidate{{PlatformModel: "up/v", Weight: 1}}})
	c.Groups = []weir.Group{{Name: "gold"}}
}

// TestPlan: a task's candidates are its model's platform models that
// run its kind's tasks, each needing its key's, group's and platform
// model's scopes; the key's scope is configured on the way. A chat
// model's tasks run (as calls answered at once); a transcription
// model's do not.
func TestPlan(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) {
		videoCatalog(c)
		c.PlatformModels = append(c.PlatformModels, weir.PlatformModel{Name: "up/stt", Platform: "up", Upstream: "whisper-1"})
		c.Models = append(c.Models, weir.Model{Name: "stt", Kind: weir.KindTranscription, Candidates: []weir.Candidate{{PlatformModel: "up/stt", Weight: 1}}})
	}})
	ctx := t.Context()
	if err := b.store.KeyCreate(ctx, weir.APIKey{ID: "key_v", Hash: "hash_v", Group: "gold", CreatedAt: b.clock.Now(),
		Limits: weir.Limits{Concurrency: 3}}); err != nil {
		t.Fatal(err)
	}
	cands, err := b.svc.Plan(ctx, weir.Task{ID: "task_1", Model: "v", KeyID: "key_v"})
	if err != nil {
		t.Fatal(err)
	}
	want := []admission.Need{{Scope: weir.KeyScope("key_v"), Amount: 1}, {Scope: weir.GroupScope("gold"), Amount: 1},
		{Scope: weir.PlatformModelScope("up/v"), Amount: 1}}
	if len(cands) != 1 || len(cands[0].Needs) != 3 || cands[0].Needs[0] != want[0] || cands[0].Needs[1] != want[1] || cands[0].Needs[2] != want[2] {
		t.Errorf("candidates %+v; want one needing %+v", cands, want)
	}
	if got := b.scope(t, weir.KeyScope("key_v")).Config.Limit; got != 3 {
		t.Errorf("the key's scope limit %d, want 3", got)
	}

	for name, tc := range map[string]struct {
		task weir.Task
		want error
	}{
		"chat model":          {weir.Task{ID: "t", Model: "m", KeyID: "key_v"}, nil},
		"transcription model": {weir.Task{ID: "t", Model: "stt", KeyID: "key_v"}, nil},
		"no model":            {weir.Task{ID: "t", Model: "nope", KeyID: "key_v"}, admission.ErrNoCandidate},
		"unknown key":         {weir.Task{ID: "t", Model: "v", KeyID: "key_gone"}, weir.ErrNotFound},
	} {
		if _, err := b.svc.Plan(ctx, tc.task); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v; want %v", name, err, tc.want)
		}
	}
	if _, err := New(Config{}, Deps{Engine: b.engine}).Plan(ctx, weir.Task{Model: "v"}); err == nil {
		t.Error("Plan without a catalog succeeded")
	}
}

// TestTargetAndHealth: Target names a platform model's upstream and async
// adapter; a task's failures put its platform model in cooldown as a
// request's would, and a success ends it.
func TestTargetAndHealth(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: videoCatalog})
	tg, ok := b.svc.Target("up/v", "")
	if !ok || tg.PlatformModel != "up/v" || tg.Upstream != "sora-2" || tg.Adapter == nil || tg.Simulated {
		t.Errorf("Target(up/v) = %+v, %v", tg, ok)
	}
	if sim, ok := b.svc.Target("up/v", weir.RunSimulation); !ok || !sim.Simulated || sim.Adapter == nil || sim.Adapter == tg.Adapter || sim.Upstream != "sora-2" {
		t.Errorf("Target(up/v, simulation) = %+v, %v; want the simulator", sim, ok)
	}
	if _, ok := b.svc.Target("nope", ""); ok {
		t.Error("Target of an unknown platform model")
	}
	if _, ok := New(Config{}, Deps{Engine: b.engine}).Target("up/v", ""); ok {
		t.Error("Target without a catalog")
	}
	m, _ := b.svc.Snapshot().Model("m")
	for range 3 {
		b.svc.UpstreamResult("up/m", false)
	}
	if order := b.svc.deps.Router.Order(m); len(order) != 1 || order[0] != "up2/m" {
		t.Errorf("order after three failures of up/m: %v", order)
	}
	b.svc.UpstreamResult("up/m", true)
	if order := b.svc.deps.Router.Order(m); len(order) != 2 || order[0] != "up/m" {
		t.Errorf("order after a success of up/m: %v", order)
	}
}

// TestTaskError: the task service's errors map to the service's
// categories; others pass as they are.
func TestTaskError(t *testing.T) {
	t.Parallel()
	other := errors.New("other")
	for _, tc := range []struct {
		err, want error
	}{
		{&admission.QueueFullError{Scope: "s", Limit: 1}, ErrQueueFull},
		{admission.ErrNoCandidate, ErrNoCandidate},
		{&provider.Error{Status: 500}, ErrUpstream},
		{other, other},
	} {
		if got := taskError("v", tc.err); !errors.Is(got, tc.want) || !errors.Is(got, tc.err) {
			t.Errorf("taskError(%v) = %v; want %v", tc.err, got, tc.want)
		}
	}
	if taskError("v", nil) != nil {
		t.Error("taskError(nil) is not nil")
	}
}

// fakeAsync is an async adapter whose Content answers with resp or err.
type fakeAsync struct {
	provider.AsyncAdapter
	resp *http.Response
	err  error
}

func (f fakeAsync) Content(context.Context, string, string) (*http.Response, error) {
	return f.resp, f.err
}

// TestVideoContent: a video's content comes from the platform that made
// it; a job the upstream forgot is not found, another failure the
// upstream's, and a platform model that left the catalog has no candidate.
func TestVideoContent(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: videoCatalog})
	front := NewTasks(b.svc, nil)
	task := weir.Task{ID: "t", PlatformModel: "up/v", UpstreamID: "video_1"}
	ok := &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("mp4"))}
	for _, tc := range []struct {
		name string
		ad   fakeAsync
		want error
	}{
		{"ok", fakeAsync{resp: ok}, nil},
		{"job gone", fakeAsync{err: provider.ErrJobNotFound}, ErrNotFound},
		{"upstream failed", fakeAsync{err: &provider.Error{Status: 502}}, ErrUpstream},
	} {
		b.svc.Snapshot().async["up"] = tc.ad
		resp, err := front.Content(t.Context(), task, "")
		if tc.want == nil && (err != nil || resp != ok) || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, %v; want %v", tc.name, resp, err, tc.want)
		}
	}
	task.PlatformModel = "gone/v"
	if _, err := front.Content(t.Context(), task, ""); !errors.Is(err, ErrNoCandidate) {
		t.Errorf("platform model gone: %v", err)
	}
}
