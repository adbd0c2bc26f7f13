package gateway

import (
	"fmt"
	"slices"
	"strings"

	"github.com/weir-gateway/weir"
)

// A request's candidates are ordered in two steps. order, here, is the
// platform models that may serve it, in the order they are tried: the
// router's (priority, then weight among equals, less those cooling
// down), less those whose Supports refuse what the request wants, less
// those off the platform it pins. Serve, Plan (a task's candidates) and
// unservable (a task's early refusal) all start from it. Then, for a
// sync request, routing.resolve (route.go) adds the edge nodes serving
// the model as they come and go, leaves out what was already tried, and
// puts the target its affinity prefers first, on each admission.

// order is the platform models that may serve a request for model
// wanting w, pinned to platform ("" none), best first. A prompt, if
// given, is counted in each platform model's encoding for its context
// window; else w.PromptTokens is. When one was left out for w, refusal
// is the error of a request none could serve; a pin that leaves none has
// a refusal too.
func (s *Service) order(st *Snapshot, model weir.Model, w weir.Wants, prompt Prompt, platform string) (pms []string, refusal *Error) {
	pms, refusal = servable(st, model, w, prompt, s.deps.Router.Order(model))
	if platform == "" {
		return pms, refusal
	}
	pms = onPlatform(st, pms, platform)
	if len(pms) == 0 && refusal == nil {
		refusal = &Error{Category: ErrUnservable, Param: ParamPlatform,
			Message: fmt.Sprintf("no candidate of %q on platform %q can serve this request", model.Name, platform)}
	}
	return pms, refusal
}

// servable is the platform models of order that can serve a request for
// model wanting w, its prompt counted as order says; when it leaves one
// out, refusal is the error of a request none could serve, naming the
// parameter of the first left out.
func servable(st *Snapshot, model weir.Model, w weir.Wants, prompt Prompt, order []string) (pms []string, refusal *Error) {
	var whys []string
	estimate := w.PromptTokens
	for i, name := range order {
		pm, ok := st.pms[name]
		if prompt != nil && pm.Supports.ContextWindow > 0 {
			w.PromptTokens = countIn(prompt, estimate, st.tokenizer(model, name))
		}
		param, why, refused := pm.Supports.Refuses(w)
		if !ok || !refused {
			if refusal != nil {
				pms = append(pms, name)
			}
			continue
		}
		if refusal == nil {
			// The first left out: the order is copied from here on (a
			// request that all can serve, the usual, copies nothing).
			refusal = &Error{Category: ErrUnservable, Param: param}
			pms = append(make([]string, 0, len(order)-1), order[:i]...)
		}
		if !slices.Contains(whys, why) {
			whys = append(whys, why)
		}
	}
	if refusal == nil {
		return order, nil
	}
	// The candidates are the operator's: the client hears why, not which.
	refusal.Message = "no candidate can serve this request: " + strings.Join(whys, "; ")
	return pms, refusal
}

// onPlatform are those of pms on platform, in their order.
func onPlatform(st *Snapshot, pms []string, platform string) []string {
	var out []string
	for _, name := range pms {
		if pm, ok := st.pms[name]; ok && pm.Platform == platform {
			out = append(out, name)
		}
	}
	return out
}

// platformModels is the platform models of catalog st that may serve c,
// whose model is m there, best first: order's, less those servedAt and
// (for a request only a native candidate serves) nativeOrder leave out.
// refusal is as order's.
func (s *Service) platformModels(c *Call, st *Snapshot, m weir.Model) (pms []string, refusal *Error) {
	pms, refusal = s.order(st, m, c.Wants, c.Prompt, c.Platform)
	pms, refusal = servedAt(c, st, m.Name, pms, refusal)
	if c.nativeOnly() {
		pms, refusal = nativeOrder(c, st, m, pms, refusal)
	}
	return pms, refusal
}

// servedAt is pms, of catalog st, less the platform models on platforms
// whose kind lacks c's endpoint (Azure has no image variations). When
// that leaves none, refusal, if there was none, says so (of model).
func servedAt(c *Call, st *Snapshot, model string, pms []string, refusal *Error) ([]string, *Error) {
	lacking := weir.PlatformKindsLacking(c.Path)
	if len(lacking) == 0 {
		return pms, refusal
	}
	var out []string
	for i, name := range pms {
		pm, ok := st.pms[name]
		served := !ok || !slices.Contains(lacking, st.kinds[pm.Platform])
		switch {
		case !served && out == nil:
			// The first left out: copied from here on.
			out = append(make([]string, 0, len(pms)-1), pms[:i]...)
		case served && out != nil:
			out = append(out, name)
		}
	}
	if out == nil {
		return pms, refusal
	}
	if len(out) == 0 && refusal == nil {
		refusal = &Error{Category: ErrUnservable, Param: "model",
			Message: fmt.Sprintf("no candidate of %q serves %s: its platforms lack that endpoint", model, c.Path)}
	}
	return out, refusal
}
