package task

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/weir-gateway/weir/webhook"
)

// Operator events are signed events about the gateway itself (a budget
// crossing an alert threshold, docs/spend.md) sent to the operator's
// own URL (Webhooks.OperatorURL), not to a client's callback. They are
// River jobs on the webhook queue like callbacks, retried on River's
// schedule until delivered, so an event survives a restart.

// OperatorEvent is one operator event; its ID is the webhook-id, the
// same on every retry, so the receiver can drop duplicates.
type OperatorEvent struct {
	ID   string          `json:"event_id"`
	Type string          `json:"type"`
	At   time.Time       `json:"at"`
	Data json.RawMessage `json:"data"`
}

// Kind names the job.
func (OperatorEvent) Kind() string { return "weir_operator_event" }

// operatorAttempts bounds an operator event's deliveries: about two days
// on River's retry schedule.
const operatorAttempts = 20

// SendOperatorEvent queues ev for the operator's URL; without one it
// does nothing.
func (s *Service) SendOperatorEvent(ctx context.Context, ev OperatorEvent) error {
	if s.hooks.OperatorURL == "" {
		return nil
	}
	return s.river.inTx(ctx, func(tx txn) error {
		return tx.jobInsert(ctx, ev, &river.InsertOpts{Queue: queueWebhooks, MaxAttempts: operatorAttempts})
	})
}

// operatorWorker delivers operator events.
type operatorWorker struct {
	river.WorkerDefaults[OperatorEvent]
	s *Service
}

// Work posts one event, as {"type", "timestamp", "data"}.
func (w *operatorWorker) Work(ctx context.Context, job *river.Job[OperatorEvent]) error {
	s, ev := w.s, job.Args
	if s.hooks.OperatorURL == "" {
		return river.JobCancel(fmt.Errorf("operator event %s: no operator URL is configured any more", ev.ID))
	}
	body, err := json.Marshal(struct {
		Type      string          `json:"type"`
		Timestamp time.Time       `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	}{ev.Type, ev.At, ev.Data})
	if err != nil {
		return river.JobCancel(err)
	}
	sender := s.hooks.OperatorSender
	if sender == nil {
		sender = s.hooks.Sender
	}
	at, err := sender.Send(ctx, webhook.Message{URL: s.hooks.OperatorURL, ID: ev.ID, Body: body, Signer: s.hooks.OperatorSigner})
	s.cfg.Metrics.WebhookAttempt(at.Outcome.String())
	switch at.Outcome {
	case webhook.Delivered:
		return nil
	case webhook.Gone, webhook.Refused:
		s.logger.Warn("operator event dropped", "event", ev.ID, "type", ev.Type, "url", webhook.Redact(s.hooks.OperatorURL), "outcome", at.Outcome.String(), "error", err)
		return river.JobCancel(err)
	}
	return fmt.Errorf("operator event %s: %w", ev.ID, err)
}
