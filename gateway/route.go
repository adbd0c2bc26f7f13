package gateway

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/provider"
)

// Nodes are the edge nodes' providers, candidates beside the catalog's
// platform models. edge.Hub implements it.
type Nodes interface {
	// Serving lists the providers of live node sessions that serve the
	// public model, in a stable order. It must not call the engine: the
	// engine asks for it (through a waiter's Resolve) under its lock.
	Serving(model string) []weir.NodeTarget
	// Do runs a call on t's provider through its node, as an Executor.
	Do(ctx context.Context, t weir.NodeTarget, c provider.Call) (*http.Response, error)
}

// target is one way to serve a request: a platform model of the
// catalog, or an edge node's provider.
type target struct {
	pm   string
	node *weir.NodeTarget
}

// name names t in the router's health, metrics, logs and usage.
func (t target) name() string {
	if t.node != nil {
		return t.node.Name()
	}
	return t.pm
}

// routing is one request's targets: the router's order of its model's
// platform models and the nodes serving it now, less those already
// tried. A waiter's Resolve resolves them again as nodes come and go;
// the lease's candidate indexes the last resolution.
type routing struct {
	s   *Service
	c   *Call
	pms []string
	// prefer names the target its affinity puts first; only, the one
	// target a strict affinity waits for ("": none). akey is the
	// request's key in the affinity table as it was routed first ("":
	// none, affinityKeyOf).
	prefer, only, akey string

	// budgets are those its candidates reserve against (budgets.go).
	budgets requestBudgets
	// place is the request's place in arrival order once a lease was
	// granted (admission.Lease.Place): an attempt after it (a retry, a
	// wait out of an upstream's pause) queues where the request first
	// arrived, not behind every request that arrived since.
	place uint64

	mu      sync.Mutex
	tried   map[string]bool
	targets []target
}

// resolve finds the request's targets now, in the model's order, and
// keeps them for admitted.
func (r *routing) resolve() []target {
	var nodes []target
	if r.s.deps.Nodes != nil && r.nodesAllowed() {
		now := r.s.deps.Clock.Now()
		for _, n := range r.s.deps.Nodes.Serving(r.c.Model.Name) {
			if until := r.s.deps.Router.CoolingUntil(nodeHealth(n)); until.After(now) {
				continue
			}
			nodes = append(nodes, target{node: &n})
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]target, 0, len(nodes)+len(r.pms))
	if r.c.Model.Nodes != weir.NodesLast {
		out = append(out, nodes...)
	}
	for _, pm := range r.pms {
		out = append(out, target{pm: pm})
	}
	if r.c.Model.Nodes == weir.NodesLast {
		out = append(out, nodes...)
	}
	kept := out[:0]
	for _, t := range out {
		if !r.tried[t.name()] {
			kept = append(kept, t)
		}
	}
	if r.prefer != "" {
		// Stable: the preferred target first, the others in their order.
		if i := slices.IndexFunc(kept, func(t target) bool { return t.name() == r.prefer }); i > 0 {
			t := kept[i]
			copy(kept[1:i+1], kept[:i])
			kept[0] = t
		}
	}
	if r.only != "" && len(kept) > 0 && kept[0].name() == r.only {
		kept = kept[:1]
	}
	r.targets = kept
	return kept
}

// nodesAllowed reports whether nodes may serve r. Nodes serve
// production alone: their runtimes are real (no simulation), their slots
// physical (no acceptance copy); and no request pinned to a platform.
// Nor one only a platform speaking the Responses API can serve. Nor an
// upload: a node's tunnel carries JSON.
func (r *routing) nodesAllowed() bool {
	c := r.c
	return c.Model.Nodes != weir.NodesNever && c.RunMode == "" && c.Platform == "" && !c.nativeOnly() && !c.isUpload()
}

// current is the last resolution.
func (r *routing) current() []target {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.targets
}

// admitted is the target of l's candidate, with its node's generation as
// the gateway sees it now. l's index is into the list its engine held,
// which is the last resolution here unless a fleet's leader queued the
// waiter with another list (the one it arrived with, or that list and
// what its Spec added, after this replica had resolved it in process
// while it led): so the target is the one whose scope l holds, the
// indexed one first. A candidate of none of them is one a fleet's leader
// added for a node that connected later (ResolveSpec), known by the slots
// l holds; false if no such node serves now.
func (r *routing) admitted(l admission.Lease) (target, bool) {
	r.mu.Lock()
	ts := r.targets
	r.mu.Unlock()
	if l.Candidate >= 0 && l.Candidate < len(ts) && (len(l.Needs) == 0 || r.holds(l, ts[l.Candidate])) {
		return r.newestGen(ts[l.Candidate]), true
	}
	for _, t := range ts {
		if r.holds(l, t) {
			return r.newestGen(t), true
		}
	}
	return r.addedNode(l)
}

// holds reports whether l holds t's own scope: its node's slots or its
// platform model's scope (in the acceptance run mode, its copy).
func (r *routing) holds(l admission.Lease, t target) bool {
	scope := ""
	if t.node != nil {
		scope = weir.NodeScope(t.node.Node, t.node.Provider)
	} else {
		scope = pmScopeFor(r.c.RunMode, t.pm)
	}
	for _, n := range l.Needs {
		if n.Scope == scope {
			return true
		}
	}
	return false
}

// newestGen is t with its node's newest generation serving. A waiter
// queued at another replica's leader (fleet) keeps the targets it arrived
// with, never resolved again here; a node that came back meanwhile is a
// newer generation of the same slots, which its lease was admitted on.
func (r *routing) newestGen(t target) target {
	if t.node == nil || r.s.deps.Nodes == nil {
		return t
	}
	for _, n := range r.s.deps.Nodes.Serving(r.c.Model.Name) {
		if n.Node == t.node.Node && n.Provider == t.node.Provider && n.Gen > t.node.Gen {
			nt := *t.node
			nt.Gen = n.Gen
			return target{node: &nt}
		}
	}
	return t
}

// failed leaves t out of the request's later attempts.
func (r *routing) failed(t target) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tried == nil {
		r.tried = make(map[string]bool)
	}
	r.tried[t.name()] = true
}

// candidates are ts as admission candidates: each needs the key's and
// the group's scope, and its platform model's scope (in the acceptance
// run mode, its acceptance copy) or its node provider's slots (and a
// long-context slot for a long prompt).
func (r *routing) candidates(ts []target) []admission.Candidate {
	c := r.c
	cands := make([]admission.Candidate, len(ts))
	for i, t := range ts {
		var needs []admission.Need
		tokenizer := c.tokenizer(t)
		if n := t.node; n != nil {
			needs = nodeNeeds(tenantNeeds(c.KeyID, c.Group), *n, needsLong(c, n), r.budgets.needs(t.pm))
		} else {
			needs = append(tenantNeeds(c.KeyID, c.Group), admission.Need{Scope: pmScopeFor(c.RunMode, t.pm), Amount: 1})
			needs = append(needs, r.budgets.needs(t.pm)...)
		}
		cands[i] = admission.Candidate{Needs: needs, Tokens: c.tokensIn(tokenizer), Cost: int64(r.estimate(t))}
	}
	return cands
}

// upstream is where an attempt goes: its name (the router's and the
// metrics'), the platform it belongs to (for logs), the model's name
// there, and its executor.
type upstream struct {
	Name, Platform, Upstream string
	ex                       Executor
	// health is its key in the router's cooldown.
	health string
	// pausable: a platform model, paused by a 429 with Retry-After.
	pausable bool
	// native: its platform speaks the API of the call's native request
	// (a node or a simulator speaks Chat Completions only).
	native bool
	// price is what its calls cost (a node provider's: its model's
	// NodePrice; a simulator's: nothing), maxOutput its
	// max_output_tokens, and tokenizer the encoding a prompt is counted
	// in there, for an estimate.
	price     weir.Price
	maxOutput int64
	tokenizer weir.Tokenizer
	// provider and responseModel name its calls in the GenAI metrics
	// (GenAIOp); provider is "" for a simulator's, which are not counted.
	provider, responseModel string
}

// speaks reports whether pm is sent c's native request instead of its
// Chat Completions.
func (pm upstream) speaks(c *Call) bool { return c.Native != nil && pm.native }

// nodeHealth is a node provider's key in the router's cooldown: its
// session's own, so that failures of a session that ended do not keep
// the node's next session cooling down.
func nodeHealth(n weir.NodeTarget) string { return fmt.Sprintf("%s@%d", n.Name(), n.Gen) }

// needsLong reports whether c's prompt, counted in its model's encoding
// for nodes, needs one of n's long-context slots.
func needsLong(c *Call, n *weir.NodeTarget) bool {
	return n.LongPromptTokens > 0 && max(c.tokensIn(weir.NodeTokenizer(c.Model))-c.MaxTokens, 0) > n.LongPromptTokens
}

func (s *Service) upstreamOf(c *Call, t target) upstream {
	if n := t.node; n != nil {
		nt := *n
		nt.Long = needsLong(c, n)
		return upstream{Name: n.Name(), Platform: "node " + n.Node, Upstream: n.Runtime, ex: nodeExecutor{s.deps.Nodes, nt},
			health: nodeHealth(*n), price: c.Model.NodePrice, provider: nodeProvider, responseModel: OtherModel,
			tokenizer: weir.NodeTokenizer(c.Model)}
	}
	if c.RunMode == weir.RunSimulation {
		// Its failures and 429s are the simulator's: they touch neither
		// the platform model's health nor its pauses.
		pm, _ := c.Snapshot.PlatformModel(t.pm)
		name := simulatedPrefix + pm.Name
		return upstream{Name: name, Platform: pm.Platform, Upstream: pm.Upstream, ex: c.Snapshot.sims[pm.Name], health: name,
			tokenizer: c.tokenizer(t)}
	}
	var up upstream
	if u := c.Snapshot.upstreams[t.pm]; u != nil {
		up = *u
	} else {
		pm, _ := c.Snapshot.PlatformModel(t.pm)
		up = pmUpstream(c.Snapshot, pm)
	}
	up.ex = c.Snapshot.Adapter(up.Platform)
	up.native = c.Native != nil && c.Snapshot.speaks(up.Platform, c.Native.API)
	up.tokenizer = c.tokenizer(t)
	return up
}

// pmUpstream is what a call to platform model pm of st is sent to, but
// for what depends on the call (native, tokenizer) and its executor,
// the platform's adapter, which is looked up at each call.
func pmUpstream(st *Snapshot, pm weir.PlatformModel) upstream {
	return upstream{Name: pm.Name, Platform: pm.Platform, Upstream: pm.Upstream, health: pm.Name, pausable: true,
		price: pm.Price, maxOutput: pm.Supports.MaxOutputTokens,
		provider: st.providerName(pm.Platform), responseModel: cmp.Or(pm.Upstream, OtherModel)}
}

// nodeExecutor runs calls on one node provider.
type nodeExecutor struct {
	nodes Nodes
	t     weir.NodeTarget
}

func (e nodeExecutor) Do(ctx context.Context, c provider.Call) (*http.Response, error) {
	return e.nodes.Do(ctx, e.t, c)
}
