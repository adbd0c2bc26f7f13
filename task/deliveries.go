package task

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// Delivery is one callback event of a task and how its delivery has gone:
// the webhook job's state in River (available, scheduled, running,
// retryable, completed, cancelled, discarded) and each failed attempt.
type Delivery struct {
	EventID, Type string
	State         string
	// Attempts counts the tries so far, MaxAttempts those allowed.
	Attempts, MaxAttempts int
	// Errors are the failed attempts, oldest first.
	Errors                              []DeliveryError
	CreatedAt, AttemptedAt, FinalizedAt time.Time
	// NextAt is when it is tried next, while it waits.
	NextAt time.Time
}

// DeliveryError is one failed attempt of a delivery.
type DeliveryError struct {
	Attempt int
	At      time.Time
	Error   string
}

// maxDeliveries bounds the deliveries Deliveries lists: the events a
// task can have are its start, its progress (throttled) and its end.
const maxDeliveries = 200

// Deliveries lists the callback events of task id and their deliveries,
// oldest first, from River's jobs (kept for River's retention of
// finished jobs).
func (s *Service) Deliveries(ctx context.Context, id string) ([]Delivery, error) {
	params := river.NewJobListParams().Kinds(WebhookArgs{}.Kind()).
		Where("args ->> 'task_id' = @task", river.NamedArgs{"task": id}).
		OrderBy(river.JobListOrderByID, river.SortOrderAsc).First(maxDeliveries)
	res, err := s.river.JobList(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("list the deliveries of task %s: %w", id, err)
	}
	out := make([]Delivery, 0, len(res.Jobs))
	for _, j := range res.Jobs {
		out = append(out, deliveryOf(j))
	}
	return out, nil
}

func deliveryOf(j *rivertype.JobRow) Delivery {
	var a WebhookArgs
	_ = json.Unmarshal(j.EncodedArgs, &a) // River decoded them to run the job: a failure leaves the ids empty
	d := Delivery{EventID: a.EventID, Type: a.Type, State: string(j.State), Attempts: j.Attempt, MaxAttempts: j.MaxAttempts,
		CreatedAt: j.CreatedAt}
	if j.AttemptedAt != nil {
		d.AttemptedAt = *j.AttemptedAt
	}
	if j.FinalizedAt != nil {
		d.FinalizedAt = *j.FinalizedAt
	}
	switch j.State {
	case rivertype.JobStateAvailable, rivertype.JobStateScheduled, rivertype.JobStateRetryable:
		d.NextAt = j.ScheduledAt
	}
	for _, e := range j.Errors {
		d.Errors = append(d.Errors, DeliveryError{Attempt: e.Attempt, At: e.At, Error: e.Error})
	}
	return d
}
