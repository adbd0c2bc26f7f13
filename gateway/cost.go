package gateway

import (
	"context"

	"github.com/weir-gateway/weir"
)

// Cost is what c cost so far, at the price of whatever served it: the
// sum over its attempts of each one's cost (an attempt whose answer
// broke before it reached the client may have been billed all the same),
// and whether any of it is an estimate because an upstream reported no
// usage. It is c.Usage's Cost and CostEstimated.
func (c *Call) Cost() (weir.Money, bool) { return c.Usage.Cost, c.Usage.CostEstimated }

// Estimate is what c may cost if platform model name serves it (or, when
// the snapshot has no platform model of that name, an edge node's
// provider at its model's node price), reserved before the call:
// weir.PlatformModel.Estimate of c's wants, its prompt counted in the
// encoding there. A simulated request costs nothing.
func (c *Call) Estimate(name string) weir.Money {
	if c.RunMode == weir.RunSimulation {
		return 0
	}
	if pm, ok := c.Snapshot.PlatformModel(name); ok {
		return pm.Estimate(c.wantsIn(c.Snapshot.tokenizer(c.Model, name)), c.Model.Kind)
	}
	return c.Model.NodePrice.Estimate(c.wantsIn(weir.NodeTokenizer(c.Model)), c.Model.Kind)
}

// attemptCost is what c's attempt on pm cost, given the usage u its
// answer reported (got: it reported some, or its images were counted),
// and whether that is an estimate:
//
//   - speech, by its input's characters, which the request holds whole
//     (its answer is audio, with no usage);
//   - the usage reported, priced, images by the size and quality asked
//     for: measured, unless the counts are the gateway's own (a stream
//     without a usage chunk: the prompt's estimate and a token a chunk);
//   - none reported: the request's estimate, its prompt counted in pm's
//     encoding.
func (c *Call) attemptCost(pm upstream, u usage, got bool) (weir.Money, bool) {
	switch {
	case c.Model.Kind == weir.KindSpeech:
		return pm.price.Cost(weir.Metered{Characters: c.Wants.Characters}), false
	case got:
		return pm.price.Cost(u.metered(c.Wants)), u.counted
	}
	est := weir.PlatformModel{Price: pm.price, Supports: weir.Capabilities{MaxOutputTokens: pm.maxOutput}}
	return est.Estimate(c.wantsIn(pm.tokenizer), c.Model.Kind), true
}

// addCost adds an attempt's cost to c's usage record.
func (c *Call) addCost(cost weir.Money, estimated bool) {
	c.Usage.Cost = c.Usage.Cost.Add(cost)
	c.Usage.CostEstimated = c.Usage.CostEstimated || estimated
}

// TaskCost is what task t costs at the price its platform model has in
// the catalog served now, its model's kind's estimate of its input
// (weir.Price.Estimate): a video's seconds (weir.DefaultVideoSeconds if
// it said none) at Second, an image task's images, speech's characters,
// and Request. Such a job makes what it was asked, so its estimate is
// its cost; a chat task's is the bound its max_tokens sets. ok is
// false before t was admitted to a platform model the catalog still
// has: it is not priced then. A budget settles a task's reservation to
// it when the job ends.
func (s *Service) TaskCost(t weir.Task) (cost weir.Money, ok bool) {
	st := s.Snapshot()
	pm, ok := st.PlatformModel(t.PlatformModel)
	if !ok {
		return 0, false
	}
	kind := weir.KindVideo
	if m, ok := st.Model(t.Model); ok {
		kind = m.Kind
	}
	return pm.Estimate(weir.TaskWants(t.Input), kind), true
}

// TaskUsage is the usage record of task t, which ended: what it cost
// (TaskCost, as its budgets counted it when its lease was released) and
// whose it was, so that spend reports and the budgets' reads of a
// window's spend see tasks as they see requests. A task that never
// reached a platform model costs nothing and has none: ok is false.
func (s *Service) TaskUsage(t weir.Task) (u weir.Usage, ok bool) {
	if t.AdmittedAt.IsZero() || t.PlatformModel == "" {
		return u, false
	}
	cost, _ := s.TaskCost(t)
	st := s.Snapshot()
	group := ""
	if k, found, err := s.keyByID(context.Background(), t.KeyID); err == nil && found {
		group, _ = st.GroupOf(k)
	}
	return weir.Usage{RequestID: t.ID, KeyID: t.KeyID, Group: group, Model: t.Model, PlatformModel: t.PlatformModel,
		Endpoint: "tasks", Outcome: string(t.Status), Cost: cost, CostEstimated: t.Status != weir.TaskSucceeded,
		Waited: t.AdmittedAt.Sub(t.CreatedAt), Latency: t.FinishedAt.Sub(t.AdmittedAt), At: t.FinishedAt}, true
}
