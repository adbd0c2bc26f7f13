package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider"
)

// OpenAI's Responses API passes through to the platforms that speak it
// (weir.Platform.SpeaksResponses). What the translation to Chat
// Completions cannot carry (a built-in tool, a reasoning item, a stored
// response to continue) only they can serve; a response they keep binds
// to the platform that made it and to the key whose request did, in the
// store (Deps.Responses), so that the request continuing it goes there
// and only that key reaches it afterwards, on any replica.

// ErrResponseNotFound: no response of that id is bound for the key;
// ErrResponseOfAnotherKey, which matches it, says that one is bound, for
// another key.
var (
	ErrResponseNotFound     = errors.New("response not found")
	ErrResponseOfAnotherKey = fmt.Errorf("%w: it is another key's", ErrResponseNotFound)
)

// nativeOrder is those of pms that are sent c.Native (on a platform that
// speaks its API, and on c.Native.Platform if it names one),
// for a request only they can serve; refusal, when it leaves none, names
// the parameter that needs them. No pms (all cooling down, or refused
// already) are left as they are if one of the model's candidates could
// serve the request; a model with none of them (one served by edge nodes
// alone) refuses it.
func nativeOrder(c *Call, pms []string, refusal *Error) ([]string, *Error) {
	st, n := c.Snapshot, c.Native
	native := func(name string) bool {
		pm, ok := st.pms[name]
		return ok && c.RunMode != weir.RunSimulation && // the simulator speaks Chat Completions only
			st.speaks(pm.Platform, n.API) && (n.Platform == "" || pm.Platform == n.Platform)
	}
	if len(pms) == 0 {
		for _, cand := range c.Model.Candidates {
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
			Message: fmt.Sprintf("no candidate of %q can continue this response: it is held by a platform that serves none of them", c.Model.Name)}
	}
	return nil, &Error{Category: ErrUnservable, Param: n.Only,
		Message: fmt.Sprintf("no candidate of %q can serve %s: only a platform that speaks %s itself can, and none of its candidates is on one", c.Model.Name, n.Only, apiNames[n.API])}
}

// apiNames name the native APIs in refusals.
var apiNames = map[NativeAPI]string{APIResponses: "the Responses API", APIMessages: "Anthropic's Messages API"}

// BindResponse records that platform holds the response id, which key's
// request made; it is kept for weir.ResponseBindingTTL. Without a store
// it does nothing.
func (s *Service) BindResponse(ctx context.Context, id, platform, keyID string) error {
	if s.deps.Responses == nil {
		return nil
	}
	now := s.deps.Clock.Now()
	return s.deps.Responses.ResponseBind(ctx, weir.ResponseBinding{ResponseID: id, Platform: platform, KeyID: keyID,
		CreatedAt: now, ExpiresAt: now.Add(weir.ResponseBindingTTL)})
}

// ResponsePlatform is the platform holding the response id that keyID's
// request made: ErrResponseNotFound if none is bound,
// ErrResponseOfAnotherKey if it is another key's.
func (s *Service) ResponsePlatform(ctx context.Context, keyID, id string) (string, error) {
	if s.deps.Responses == nil {
		return "", ErrResponseNotFound
	}
	b, err := s.deps.Responses.ResponseBindingGet(ctx, &weir.ResponseBindingGetParams{ResponseID: id, Now: s.deps.Clock.Now()})
	switch {
	case errors.Is(err, weir.ErrNotFound):
		return "", ErrResponseNotFound
	case err != nil:
		return "", &Error{Category: ErrUnavailable, Message: "could not read which platform holds the response", Err: err}
	case b.KeyID != keyID:
		return "", ErrResponseOfAnotherKey
	}
	return b.Platform, nil
}

// ResponseCall passes c, a call on the response id that keyID's request
// made (retrieving, deleting or cancelling it, or listing its input
// items), to the platform that holds it, and forgets the binding once a
// deletion succeeded. It returns the upstream's 2xx answer, or
// ErrResponseNotFound, a *RefusedError (the upstream's refusal, to pass
// on) or an *Error.
func (s *Service) ResponseCall(ctx context.Context, keyID, id string, c provider.Call) (*http.Response, error) {
	platform, err := s.ResponsePlatform(ctx, keyID, id)
	if err != nil {
		return nil, err
	}
	st := s.state.Load()
	if st == nil || !st.responses[platform] {
		return nil, ErrResponseNotFound // its platform left the catalog, or no longer speaks the API
	}
	resp, err := st.Adapter(platform).Do(ctx, c)
	if err != nil {
		var pe *provider.Error
		switch {
		case ctx.Err() != nil:
			return nil, ErrClientGone
		case errors.As(err, &pe) && !pe.Retryable():
			return nil, &RefusedError{Status: pe.Status, Body: pe.Body}
		case errors.As(err, &pe) && pe.Timeout:
			return nil, &Error{Category: ErrUpstreamTimeout, Message: "the platform holding the response did not answer in time", Err: err}
		}
		return nil, &Error{Category: ErrUpstream, Message: "the platform holding the response failed: " + err.Error(), Err: err}
	}
	if c.Method == http.MethodDelete {
		if err := s.deps.Responses.ResponseUnbind(context.WithoutCancel(ctx), id); err != nil {
			s.deps.Metrics.DroppedError("response_unbind")
			s.deps.Logger.Warn("could not forget a deleted response's platform", "response_id", id, "error", err)
		}
	}
	return resp, nil
}
