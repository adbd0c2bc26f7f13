package task

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/webhook"
)

// Webhooks configures callback delivery.
type Webhooks struct {
	Sender *webhook.Sender
	Signer *webhook.Signer
	// Schedule is the retry schedule; default webhook.DefaultSchedule.
	Schedule webhook.Schedule
}

// WebhookArgs is the River job that delivers one event about a task. Its
// EventID is the webhook-id: the same on every retry.
type WebhookArgs struct {
	TaskID  string `json:"task_id"`
	EventID string `json:"event_id"`
	Type    string `json:"type"`
}

// Kind names the job.
func (WebhookArgs) Kind() string { return "weir_task_webhook" }

// Event is the body posted to a callback URL (Standard Webhooks' shape:
// type, timestamp, data).
type Event struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      EventTask `json:"data"`
}

// EventTask is the task as an event carries it.
type EventTask struct {
	ID       string          `json:"id"`
	Object   string          `json:"object"`
	Model    string          `json:"model"`
	Status   weir.TaskStatus `json:"status"`
	Progress int             `json:"progress"`
	Result   json.RawMessage `json:"result"`
	Error    *EventError     `json:"error"`
}

// EventError is a failed task's error.
type EventError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func eventType(st weir.TaskStatus) string { return "task." + string(st) }

type webhookWorker struct {
	river.WorkerDefaults[WebhookArgs]
	s *Service
}

// NextRetry follows the webhook schedule rather than River's default.
func (w *webhookWorker) NextRetry(job *river.Job[WebhookArgs]) time.Time {
	d, ok := w.s.hooks.Schedule.NextDelay(job.Attempt)
	if !ok {
		d = time.Hour
	}
	return time.Now().Add(d)
}

// Work delivers the event once: delivered ends the job, 410 or a refused
// address cancels it for good, anything else is retried on schedule.
func (w *webhookWorker) Work(ctx context.Context, job *river.Job[WebhookArgs]) error {
	s := w.s
	t, err := s.store.TaskGet(ctx, job.Args.TaskID)
	if errors.Is(err, weir.ErrNotFound) {
		return river.JobCancel(fmt.Errorf("task %s is gone", job.Args.TaskID))
	}
	if err != nil {
		return err
	}
	ev := Event{Type: job.Args.Type, Timestamp: s.clock.Now().UTC(), Data: EventTask{
		ID: t.ID, Object: "task", Model: t.Model, Status: t.Status, Progress: t.Progress, Result: t.Result,
	}}
	if len(ev.Data.Result) == 0 {
		ev.Data.Result = json.RawMessage("null")
	}
	if t.ErrorCode != "" {
		ev.Data.Error = &EventError{Code: t.ErrorCode, Message: t.ErrorMessage}
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return river.JobCancel(err)
	}
	at, err := s.hooks.Sender.Send(ctx, webhook.Message{URL: t.CallbackURL, ID: job.Args.EventID, Body: body, Signer: s.hooks.Signer})
	s.cfg.Metrics.WebhookAttempt(at.Outcome.String())
	switch at.Outcome {
	case webhook.Delivered:
		return nil
	case webhook.Gone, webhook.Refused:
		s.logger.Warn("webhook dropped", "task", t.ID, "outcome", at.Outcome.String(), "error", err)
		return river.JobCancel(err)
	}
	return fmt.Errorf("webhook for %s: %w", t.ID, err)
}

// finishTx moves a task to a terminal status in tx and, if it has a
// callback, inserts the webhook job in the same transaction, so an event is
// sent exactly for the transitions that happened.
func (s *Service) finishTx(ctx context.Context, tx *sql.Tx, t weir.Task, u weir.TaskUpdate) (bool, error) {
	ok, err := s.store.TaskUpdateTx(ctx, tx, t.ID, u)
	if err != nil || !ok || t.CallbackURL == "" || s.hooks.Sender == nil {
		return ok, err
	}
	args := WebhookArgs{TaskID: t.ID, EventID: "evt_" + t.ID + "_" + string(u.Status), Type: eventType(u.Status)}
	_, err = s.river.InsertTx(ctx, tx, args, &river.InsertOpts{Queue: QueueWebhooks, MaxAttempts: s.hooks.Schedule.MaxAttempts()})
	return ok, err
}

// CallbacksEnabled reports whether tasks may ask for callbacks: only when
// events can be signed.
func (s *Service) CallbacksEnabled() bool { return s.hooks.Sender != nil && s.hooks.Signer != nil }
