package gateway

import (
	"fmt"

	"github.com/weir-gateway/weir"
)

// A request in a dialect that some platforms speak themselves (the
// Responses API, Anthropic's Messages API) carries it as the client sent
// it (Call.Native) beside its Chat Completions translation: a candidate
// on such a platform is sent the former, any other the latter. What the
// translation cannot carry only the former can serve (nativeOrder).

// nativeOrder is those of pms, of catalog st where c's model is m, that
// are sent c.Native (on a platform that
// speaks its API, and on c.Native.Platform if it names one),
// for a request only they can serve; refusal, when it leaves none, names
// the parameter that needs them. No pms (all cooling down, or refused
// already) are left as they are if one of the model's candidates could
// serve the request; a model with none of them (one served by edge nodes
// alone) refuses it.
func nativeOrder(c *Call, st *Snapshot, m weir.Model, pms []string, refusal *Error) ([]string, *Error) {
	n := c.Native
	native := func(name string) bool {
		pm, ok := st.pms[name]
		return ok && c.RunMode != weir.RunSimulation && // the simulator speaks Chat Completions only
			st.speaks(pm.Platform, n.API) && (n.Platform == "" || pm.Platform == n.Platform)
	}
	if len(pms) == 0 {
		for _, cand := range m.Candidates {
			if native(cand.PlatformModel) {
				return pms, refusal
			}
		}
	}
	var out []string
	for _, name := range pms {
		if native(name) {
			out = append(out, name)
		}
	}
	if len(out) > 0 {
		return out, refusal
	}
	if n.Platform != "" {
		return nil, &Error{Category: ErrUnservable, Param: "previous_response_id",
			Message: fmt.Sprintf("no candidate of %q can continue this response: it is held by a platform that serves none of them", m.Name)}
	}
	return nil, &Error{Category: ErrUnservable, Param: n.Only,
		Message: fmt.Sprintf("no candidate of %q can serve %s: only a platform that speaks %s itself can, and none of its candidates is on one", m.Name, n.Only, apiNames[n.API])}
}

// apiNames name the native APIs in refusals.
var apiNames = map[NativeAPI]string{APIResponses: "the Responses API", APIMessages: "Anthropic's Messages API"}
