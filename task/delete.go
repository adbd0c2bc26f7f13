package task

import (
	"context"
	"errors"
	"fmt"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider"
)

// Delete deletes a task as OpenAI deletes a video. A task that has not
// ended is cancelled first (Cancel, which also stops its upstream job);
// a finished one has its upstream job deleted, the upstream's copy of
// the output. Then the task is marked deleted: it stays stored, but the
// API treats it as gone. A task already deleted, or not there, is
// ErrNotFound.
//
// An upstream that refuses the delete, other than by not having the job
// (deleted or expired already), leaves the task as it was, and its error
// (a *provider.Error) is returned, so that the client can try again; a
// platform that left the catalog cannot be asked, and the task is marked
// deleted all the same.
func (s *Service) Delete(ctx context.Context, id string) error {
	t, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	if t.Deleted() {
		return ErrNotFound
	}
	upstreamStopped := false
	if !t.Status.Terminal() {
		if t, err = s.Cancel(ctx, id); err != nil {
			return err
		}
		if !t.Status.Terminal() {
			return fmt.Errorf("delete task %s: still %s after cancelling it", id, t.Status)
		}
		// Cancel stopped the upstream job, unless the task ended another
		// way meanwhile: then its job is deleted below.
		upstreamStopped = t.Status == weir.TaskCancelled
	}
	if t.UpstreamID != "" && !upstreamStopped {
		if target, ok := s.targetOf(t); !ok {
			s.logger.Warn("upstream job of a deleted task not deleted: its platform left the catalog",
				"task", id, "platform_model", t.PlatformModel, "upstream_id", t.UpstreamID)
		} else if err := target.Adapter.Cancel(ctx, t.UpstreamID); err != nil && !errors.Is(err, provider.ErrJobNotFound) {
			return fmt.Errorf("delete task %s: upstream job %s: %w", id, t.UpstreamID, err)
		}
	}
	deleted, err := s.store.TaskDelete(context.WithoutCancel(ctx), &weir.TaskDeleteParams{ID: id, At: s.clock.Now()})
	switch {
	case errors.Is(err, weir.ErrNotFound):
		return ErrNotFound
	case err != nil:
		return err
	case !deleted:
		return ErrNotFound // another delete came first
	}
	return nil
}
