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
