package gateway

import (
	"context"
	"errors"
	"net/http"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/provider"
)

// TaskError is err, from the task service about a task of model, in the
// service's categories: admission refusing a submission (a full queue,
// a wait already over, no candidate) and an upstream's failure (deleting a finished task's
// job upstream). Anything else is returned as it is.
func TaskError(model string, err error) error {
	var pe *provider.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, admission.ErrQueueFull):
		return queueFull(model, err)
	case errors.Is(err, admission.ErrTimeout):
		// A submission whose wait had ended before it could queue (it
		// asked for none while capacity was taken): only its own
		// X-Weir-Max-Wait sets one.
		return queueTimeout(model, 0, "the task's own max wait", true, err)
	case errors.Is(err, admission.ErrNoCandidate):
		return &Error{Category: ErrNoCandidate, Param: "model", Message: err.Error(), Err: err}
	case errors.As(err, &pe):
		return &Error{Category: ErrUpstream, Message: err.Error(), Err: err}
	}
	return err
}

// VideoContent fetches a finished video's asset (variant "", "video",
// "thumbnail" or "spritesheet") from the platform that made it. The
// caller closes the body.
func (s *Service) VideoContent(ctx context.Context, t weir.Task, variant string) (*http.Response, error) {
	target, ok := s.Target(t.PlatformModel, t.RunMode)
	if !ok {
		return nil, errorf(ErrNoCandidate, "", "the platform that made this video left the catalog")
	}
	resp, err := target.Adapter.Content(ctx, t.UpstreamID, variant)
	switch {
	case err == nil:
		return resp, nil
	case errors.Is(err, provider.ErrJobNotFound):
		return nil, &Error{Category: ErrNotFound, Param: "id", Message: "the upstream no longer has this video", Err: err}
	}
	return nil, &Error{Category: ErrUpstream, Message: "the upstream could not serve this video's content", Err: err}
}
