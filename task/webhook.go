package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
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
	// PerKey is how many deliveries of one API key's tasks run at once in
	// this process; the key's others are put off (see webhookWorker.Work).
	// Default 8, a quarter of the webhook workers.
	PerKey int
	// OperatorURL receives the operator events (operator.go), signed by
	// OperatorSigner and sent by OperatorSender (default Sender): the
	// operator's own receiver, which may live on an internal network
	// that clients' callbacks may not reach. "": none is sent.
	OperatorURL    string
	OperatorSigner *webhook.Signer
	OperatorSender *webhook.Sender
	// DefaultURL receives the terminal event of every task that names no
	// callback URL of its own, signed by Signer as a task's callbacks
	// are, and sent by OperatorSender (default Sender): the operator's
	// receiver, which may be on an internal network. "": none.
	DefaultURL string
}

// deferMin and deferMax bound how long a delivery whose key is at its
// bound is put off (see "Callbacks" in the package doc).
const (
	deferMin = 250 * time.Millisecond
	deferMax = 30 * time.Second
)

// deferDelay is how long a delivery whose key is at its bound is put off,
// the snoozes-th time (counting from 0): deferMin doubling up to
// deferMax, ±20% at random so that a key's put-off jobs come back
// spread out. It grows so that a key with a long backlog behind a
// hanging receiver costs few fetches, and is short at first so that a
// key that is only busy is served as soon as a slot frees.
func deferDelay(snoozes int) time.Duration {
	d := deferMax
	if snoozes < 8 {
		d = min(deferMin<<snoozes, deferMax)
	}
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// snoozesOf is how many times job was snoozed (River keeps the count in
// its metadata).
func snoozesOf(job *river.Job[WebhookArgs]) int {
	if job.JobRow == nil {
		return 0
	}
	var m struct {
		Snoozes int `json:"snoozes"`
	}
	_ = json.Unmarshal(job.Metadata, &m)
	return max(m.Snoozes, 0)
}

// Callback events.
//
// Every task with a callback URL gets one terminal event, task.<status>,
// inserted in the transaction that ends the task (finishTx). A task that
// asked for weir.TaskEventProgress also gets:
//
//   - task.running when it is submitted upstream (admitted → running),
//     webhook-id evt_<task>_running;
//   - task.progress when a poll finds its progress at least
//     progressEventStep points above the last one it was told of (by
//     task.running or task.progress) and at least progressEventGap after
//     it, webhook-id evt_<task>_progress_<percent>. A poll that finds
//     the job ended sends the terminal event instead, and 100% is never
//     a progress event. So a task gets at most ten progress events, and
//     a client never more than one every progressEventGap; progress that
//     advanced too soon is reported by the first poll after the gap.
//     Progress is only seen when the job is polled (see follow.go), so an
//     event may come a poll past its step.
//
// Each is inserted in the transaction of the store update that caused it,
// and carries the task's status and progress as of then: a progress event
// delivered after the task ended still says what it reported, while a
// terminal event's body is the task as delivered (which no longer
// changes). The throttle's memory lives with the run (see run); a process
// that takes a task over starts it from the stored progress and its own
// clock, which never sends sooner or smaller steps than the rules allow,
// and may skip a step.
const (
	progressEventStep = 10 // percentage points
	progressEventGap  = 5 * time.Second
)

// progressEventDue reports whether a poll at now that found a running
// task at progress p sends task.progress, when the last progress the
// client was told of was last, at lastAt.
func progressEventDue(last int, lastAt time.Time, p int, now time.Time) bool {
	return p < 100 && p >= last+progressEventStep && now.Sub(lastAt) >= progressEventGap
}

// WebhookArgs is the River job that delivers one event about a task. Its
// EventID is the webhook-id: the same on every retry.
type WebhookArgs struct {
	TaskID string `json:"task_id"`
	// KeyID is the task's key, whose slots the delivery takes; empty in
	// jobs inserted before it was kept: the task's is read.
	KeyID   string `json:"key_id,omitempty"`
	EventID string `json:"event_id"`
	Type    string `json:"type"`
	// Status and Progress are the task as of an event about a task that
	// has not ended (task.running, task.progress), which its body
	// reports whatever the task is by delivery. Terminal events carry
	// neither.
	Status   weir.TaskStatus `json:"status,omitempty"`
	Progress *int            `json:"progress,omitempty"`
	// At is when the event happened, the body's timestamp; zero (jobs
	// inserted before it was kept): the time of delivery.
	At time.Time `json:"at,omitzero"`
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

// Work delivers the event once: delivered ends the job, a refused address
// cancels it for good, anything else is retried on schedule. A 410 Gone
// cancels it and is recorded on the task (TaskCallbackGone), so that no
// later event of the task is sent to its callback URL either.
//
// Before it sends, a delivery takes a slot of its key's (Webhooks.PerKey);
// with none free it is snoozed for deferDelay and sends nothing.
func (w *webhookWorker) Work(ctx context.Context, job *river.Job[WebhookArgs]) error {
	s := w.s
	key := job.Args.KeyID
	var t weir.Task
	if key == "" {
		var err error
		if t, err = s.webhookTask(ctx, job.Args.TaskID); err != nil {
			return err
		}
		key = t.KeyID
	}
	if !s.hookSlots.TryAcquire(key) {
		n := snoozesOf(job)
		s.logger.Debug("webhook put off: its key has its deliveries in flight", "task", job.Args.TaskID, "key", key, "snoozes", n)
		return river.JobSnooze(deferDelay(n))
	}
	defer s.hookSlots.Release(key)
	if t.ID == "" {
		var err error
		if t, err = s.webhookTask(ctx, job.Args.TaskID); err != nil {
			return err
		}
	}
	if !t.CallbackGoneAt.IsZero() {
		s.cfg.Metrics.WebhookAttempt(webhook.Gone.String())
		s.logger.Info("webhook not sent: the receiver answered 410 Gone to an earlier event", "task", t.ID, "event", job.Args.EventID)
		return river.JobCancel(fmt.Errorf("webhook for %s: %w at %s to an earlier event", t.ID, webhook.ErrGone, t.CallbackGoneAt.Format(time.RFC3339)))
	}
	body, err := json.Marshal(s.eventOf(t, job.Args))
	if err != nil {
		return river.JobCancel(err)
	}
	url, sender := s.callbackOf(t)
	if url == "" {
		return river.JobCancel(fmt.Errorf("webhook for %s: no callback URL (the default was unset since)", t.ID))
	}
	ctx, span := s.callbackSpan(ctx, t, job.Args.EventID, job.JobRow)
	defer endTaskSpan(span)
	at, err := sender.Send(ctx, webhook.Message{URL: url, ID: job.Args.EventID, Body: body, Signer: s.hooks.Signer, Tenant: t.KeyID})
	s.cfg.Metrics.WebhookAttempt(at.Outcome.String())
	switch at.Outcome {
	case webhook.Delivered:
		return nil
	case webhook.Gone:
		// Recorded before the job ends: if the store fails, the job is
		// retried and the receiver says 410 again.
		if _, merr := s.store.TaskCallbackGone(ctx, &weir.TaskCallbackGoneParams{ID: t.ID, At: s.clock.Now()}); merr != nil {
			return fmt.Errorf("webhook for %s: %w; %w", t.ID, err, merr)
		}
		fallthrough
	case webhook.Refused:
		s.logger.Warn("webhook dropped", "task", t.ID, "callback", webhook.Redact(url), "outcome", at.Outcome.String(), "error", err)
		return river.JobCancel(err)
	}
	return fmt.Errorf("webhook for %s: %w", t.ID, err)
}

// webhookTask loads the task a delivery is about; one that is not there
// cancels the job.
func (s *Service) webhookTask(ctx context.Context, id string) (weir.Task, error) {
	t, err := s.store.TaskGet(ctx, id)
	if errors.Is(err, weir.ErrNotFound) {
		return t, river.JobCancel(fmt.Errorf("task %s is gone", id))
	}
	return t, err
}

// eventOf is the body of the event args names about t, as t is now.
func (s *Service) eventOf(t weir.Task, args WebhookArgs) Event {
	at := args.At
	if at.IsZero() {
		at = s.clock.Now()
	}
	ev := Event{Type: args.Type, Timestamp: at.UTC(), Data: EventTask{
		ID: t.ID, Object: "task", Model: t.Model, Status: t.Status, Progress: t.Progress, Result: t.Result,
	}}
	if args.Status != "" {
		// An event about a task that had not ended: the task as it was.
		ev.Data.Status, ev.Data.Result = args.Status, nil
		if args.Progress != nil {
			ev.Data.Progress = *args.Progress
		}
	} else if t.ErrorCode != "" {
		ev.Data.Error = &EventError{Code: t.ErrorCode, Message: t.ErrorMessage}
	}
	if len(ev.Data.Result) == 0 {
		ev.Data.Result = json.RawMessage("null")
	}
	return ev
}

// callbacksOn reports whether events about t are sent: it has a callback
// URL that has not answered 410 Gone.
func (s *Service) callbacksOn(t weir.Task) bool {
	return t.CallbackURL != "" && t.CallbackGoneAt.IsZero() && s.hooks.Sender != nil
}

// terminalCallbackOn reports whether t's terminal event is sent: to its
// callback URL, or else to the default one (Webhooks.DefaultURL), unless
// that answered 410 Gone to an event of t.
func (s *Service) terminalCallbackOn(t weir.Task) bool {
	return s.callbacksOn(t) || (t.CallbackURL == "" && s.hooks.DefaultURL != "" && t.CallbackGoneAt.IsZero() && s.hooks.Sender != nil)
}

// callbackOf is where t's events go, and who sends them: its own
// callback URL by the clients' sender, or else the default one by the
// operator's.
func (s *Service) callbackOf(t weir.Task) (string, *webhook.Sender) {
	if t.CallbackURL != "" || s.hooks.DefaultURL == "" {
		return t.CallbackURL, s.hooks.Sender
	}
	if s.hooks.OperatorSender != nil {
		return s.hooks.DefaultURL, s.hooks.OperatorSender
	}
	return s.hooks.DefaultURL, s.hooks.Sender
}

// insertEventTx inserts the webhook job of one event in tx.
func (s *Service) insertEventTx(ctx context.Context, tx txn, args WebhookArgs) error {
	return tx.jobInsert(ctx, args, &river.InsertOpts{Queue: queueWebhooks, MaxAttempts: s.hooks.Schedule.MaxAttempts()})
}

// finishTx moves a task to a terminal status in tx and, if it has a
// callback, inserts the webhook job in the same transaction, so an event is
// sent exactly for the transitions that happened.
func (s *Service) finishTx(ctx context.Context, tx txn, t weir.Task, u weir.TaskUpdate) (bool, error) {
	ok, err := tx.taskUpdate(ctx, &weir.TaskUpdateParams{ID: t.ID, Update: u})
	if err != nil || !ok || !s.terminalCallbackOn(t) {
		return ok, err
	}
	args := WebhookArgs{TaskID: t.ID, KeyID: t.KeyID, EventID: "evt_" + t.ID + "_" + string(u.Status), Type: eventType(u.Status), At: u.FinishedAt}
	return ok, s.insertEventTx(ctx, tx, args)
}

// updateWithEvent applies u to t and, if ev is not nil and t has a
// callback, inserts ev's webhook job in the same transaction: the event is
// sent exactly when the update happened.
func (s *Service) updateWithEvent(ctx context.Context, t weir.Task, u weir.TaskUpdate, ev *WebhookArgs) (bool, error) {
	if ev == nil || !s.callbacksOn(t) {
		return s.store.TaskUpdate(ctx, &weir.TaskUpdateParams{ID: t.ID, Update: u})
	}
	var ok bool
	err := s.river.inTx(ctx, func(tx txn) error {
		var err error
		if ok, err = tx.taskUpdate(ctx, &weir.TaskUpdateParams{ID: t.ID, Update: u}); err != nil || !ok {
			return err
		}
		return s.insertEventTx(ctx, tx, *ev)
	})
	return ok, err
}

// runEventID is the webhook-id of an event about t's run: the same on
// every delivery of the event, and another for each upstream job a task
// whose job failed runs (t.Attempts), so that a receiver that drops
// repeated ids does not drop the second run's events.
func runEventID(t weir.Task, what string) string {
	if t.Attempts == 0 {
		return "evt_" + t.ID + "_" + what
	}
	return "evt_" + t.ID + "_" + strconv.Itoa(t.Attempts) + "_" + what
}

// runningEvent is task.running for t, submitted upstream at at with
// progress p, if t asked for progress events.
func runningEvent(t weir.Task, p int, at time.Time) *WebhookArgs {
	if !t.WantsEvent(weir.TaskEventProgress) {
		return nil
	}
	return &WebhookArgs{TaskID: t.ID, KeyID: t.KeyID, EventID: runEventID(t, "running"), Type: eventType(weir.TaskRunning),
		Status: weir.TaskRunning, Progress: &p, At: at}
}

// progressEvent is task.progress for t at progress p, if t asked for
// progress events and one is due at now after those r has sent.
func progressEvent(t weir.Task, r *run, p int, now time.Time) *WebhookArgs {
	if !t.WantsEvent(weir.TaskEventProgress) || !progressEventDue(r.told, r.toldAt, p, now) {
		return nil
	}
	return &WebhookArgs{TaskID: t.ID, KeyID: t.KeyID, EventID: runEventID(t, fmt.Sprintf("progress_%d", p)), Type: "task.progress",
		Status: weir.TaskRunning, Progress: &p, At: now}
}

// CallbacksEnabled reports whether tasks may ask for callbacks: only when
// events can be signed.
func (s *Service) CallbacksEnabled() bool { return s.hooks.Sender != nil && s.hooks.Signer != nil }

// ValidateCallbackURL is the refusal of a callback URL a task asks for
// (webhook.Sender.ValidateURL: one its sender would not post to); nil
// if the sender takes it. Without callbacks, every URL is refused.
func (s *Service) ValidateCallbackURL(raw string) error {
	if !s.CallbacksEnabled() {
		return errors.New("callbacks are not enabled")
	}
	return s.hooks.Sender.ValidateURL(raw)
}
