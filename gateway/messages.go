package gateway

import (
	"context"
	"errors"
	"net/http"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider"
)

// CountTokens passes a Messages count_tokens request (body, its model
// Weir's name) to the platform of the first candidate of g's model, in
// the order a request for it would try them, when that platform speaks
// the Messages API itself: ok is false when it does not (the caller
// answers its own estimate). The call is not queued: counting costs no
// capacity upstream. It returns the upstream's 2xx answer, or a
// *RefusedError (its refusal of the request, to pass on); another
// failure is ok false too, logged.
func (s *Service) CountTokens(ctx context.Context, g Grant, body Body, header http.Header) (resp *http.Response, ok bool, err error) {
	st := g.Snapshot
	if st == nil || g.RunMode == weir.RunSimulation {
		return nil, false, nil
	}
	pms, _ := s.order(st, g.Model, weir.Wants{}, nil, g.Platform)
	if len(pms) == 0 {
		return nil, false, nil
	}
	pm, found := st.PlatformModel(pms[0])
	if !found || !st.speaks(pm.Platform, APIMessages) {
		return nil, false, nil
	}
	b, err := body.WithModel(pm.Upstream)
	if err != nil {
		return nil, false, &Error{Category: ErrInternal, Message: "could not encode the upstream request", Err: err}
	}
	resp, err = st.Adapter(pm.Platform).Do(ctx, provider.Call{Path: "/messages/count_tokens", Body: b, Header: header})
	if err == nil {
		return resp, true, nil
	}
	var pe *provider.Error
	switch {
	case ctx.Err() != nil:
		return nil, false, ErrClientGone
	case errors.As(err, &pe) && !pe.Retryable():
		return nil, false, &RefusedError{Status: pe.Status, Body: pe.Body}
	}
	s.deps.Logger.Warn("the platform could not count a request's tokens; answering Weir's estimate", "platform_model", pm.Name, "error", err)
	return nil, false, nil
}
