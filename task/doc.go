// Package task runs durable asynchronous tasks — videos, images, speech —
// through admission.
//
// # Life of a task
//
// A submitted task is stored, then waits in the engine in submission order
// (priority first) for its scopes plus the global worker-capacity scope
// (WorkersScope); a task of an acceptance run also needs the runs' share
// of it (AcceptanceWorkersScope, a quarter of the workers), so runs never
// hold the workers production's tasks need. When it is admitted, its status change and its River job
// are committed in one transaction. The job (run.go) submits it upstream
// and records the upstream id before anything else (the Idempotency-Key is
// the task id, so a resubmit after a crash in between finds the same job),
// then follows the job to its end (follow.go, polling on the schedule in
// schedule.go), renewing the lease, stores the result and releases the
// lease once. A terminal status is compare-and-set and never
// left; each terminal transition inserts its webhook job in the same
// transaction (webhook.go), as do the opt-in running and progress events.
// Deliveries are fair between API keys, and a 410 Gone ends delivery to
// the task's callback URL (see Callbacks).
//
// # Polling
//
// The next poll of a running job is due when the upstream's progress says
// the job may have ended (nextPoll), its first near the end of the
// shortest of its platform model's last jobs (firstPoll), and a wait
// short enough is waited
// inside the job's execution rather than as a River snooze, so that
// capacity is handed on within milliseconds of a job's end. A cancel ends
// such a wait at once; Stop makes it a snooze.
//
// # When the upstream fails
//
//   - A platform that refuses a submit for capacity (429), or certainly
//     started nothing (500, 502, 503, unreachable), sends the task back to
//     the queue without that platform if another candidate may take it,
//     one that has not refused it since it last queued for all its
//     candidates; once every candidate has, a 429 waits out Retry-After
//     and a 5xx is retried by River, as with one candidate. Calls count
//     toward the platform's cooldown (HealthReporter).
//   - Polls failing with the upstream's trouble are waited out for up to
//     pollOutage without spending River's attempts.
//   - An upstream job that ends failed, not for the request's fault, is
//     retried as a new job from the queue after a backoff with jitter,
//     up to Config.MaxAttempts jobs (retry.go).
//   - Anything else is retried by River with its backoff; when River gives
//     up, the task fails with gave_up and its upstream job is cancelled.
//
// # Callbacks
//
// Deliveries run on queueWebhooks' webhookWorkers workers, shared by
// every tenant; a tenant is an API key (the task's KeyID). A delivery
// takes a slot (webhook.Limiter) before it sends: a key has at most
// Webhooks.PerKey (8) deliveries in flight, and the deliveries beyond
// each key's first at most webhookShared (16) together. When the slot is
// refused the job is snoozed, not spending an attempt, for deferDelay.
// So a key whose receivers hang holds at most 8 workers; keys that all
// hang at once hold at most 16 beyond one each; and a key with nothing
// in flight finds a worker unless 16 other keys each have a delivery
// hanging. River fetches due jobs in order of when they became due, so a
// snoozed job goes behind those already waiting, and a new delivery may
// wait a few fetch rounds behind snoozed jobs that came due before it. The Sender also gives
// attempts to a receiver that has been timing out a shorter timeout
// (webhook.Config.SlowTimeout, 5s), remembered per key and host, so a
// hanging receiver turns its key's slots over faster.
//
// The unit is the key rather than the receiving host because the key is
// what the gateway shares fairly everywhere else (admission's fairness
// key), and what a tenant cannot multiply: a client can name any number
// of hosts (one wildcard DNS record), so a bound per host would not
// bound a tenant; and a host shared by many tenants (a webhook relay)
// would, bounded per host, make one tenant's backlog there everyone's.
// The bound is per process, like River's workers.
//
// A receiver that answers 410 Gone wants no more events of the task: the
// worker records it on the task (TaskCallbackGone) before it cancels the
// job, and a later event of the task is cancelled unsent, or not queued
// at all; each counts as outcome gone.
//
// # Crashes and restarts
//
// At Start (in a fleet: when a replica starts to lead), admitted
// and running tasks get their leases back (Restore), waiting tasks
// re-enter the queue in their original order, and — when this process
// is the store's only runner (Config.SoleRunner) — the jobs its previous
// run left mid-step are made available at once (reclaim.go) instead of
// after RescueAfter. Finished tasks are purged after
// Config.Retention by a periodic River job (purge.go).
//
// # Several replicas
//
// With Deps.Leadership, several replicas share the store and a fleet's
// admission engine (package fleet), and durable work belongs to the
// fleet's term. Any replica accepts, reads, cancels and deletes tasks,
// and runs their jobs (River spreads them; each replica runs at most its
// own Config.Workers). The admission side — the waiters, the leases, the
// commits of admissions, recovery — runs only on the replica that leads,
// on the engine the term gives it: Start subscribes to the fleet's
// leadership (admission.Leadership, which fleet.Member publishes) and
// follows its events in order — a term began or ended here, the live
// replicas' workers changed, a replica was forgotten (its jobs are
// reclaimed at once) — so nothing depends on which was built first.
// The admission side is the term's ledger (term.go, dispatch.go,
// resync.go, lead.go). The workers scope's limit there is the sum over
// the live replicas.
//
// The ledger learns what the other replicas did from notices (Notifier:
// LISTEN/NOTIFY on PostgreSQL) — a task submitted, cancelled, sent back
// to the queue, or ended — and reads the task in the store for each; as
// the safety net it polls the store every Config.FleetPoll (jittered, and
// at least ten times as long as its last poll took), queueing the queued
// tasks that are not waiting, releasing the leases of tasks that ended,
// cancelling the waiters of tasks that are no longer queued, restoring
// the leases of running tasks it does not hold, and renewing the leases
// it holds; after its listener reconnects it does the same at once. The
// poll reads each task that has not ended as its status alone (a
// StateLister's), and whole only the tasks it queues or restores the
// lease of. Its reads do not wait for the dispatcher's commits, nor the
// commits for them: a commit made during a read records its tasks, which
// the read leaves to the next look, so that what it decides from a read
// is never undone by a commit in between. The tasks that notices say
// ended are read first, since an ended task never changes again. A worker
// holds no lease: a step that ends the task, or sends it back, tells the
// ledger (the leader's own workers in the process, the others by a
// notice), which releases the lease or queues the task again (on the
// candidates no replica's refusals rule out, or after the wait the
// worker asks for).
//
// When the term passes to another replica, its engine, waiters and
// leases go with it, unreleased; the new leader's ledger recovers from
// the store as a restart does. A replica that starts recovers nothing
// itself. Its River client id is Config.Replica: at start it takes back
// the jobs its previous run left running, and ReclaimFrom takes back
// another replica's at once when the fleet declares it gone.
//
// A commit of admissions is fenced by the term: the store (a Fencer,
// postgres.DB.TermFenceTx) checks, inside the commit's transaction, that
// the term's epoch is still this replica's and holds it so until the
// commit ends, so a leader paused past its term and resumed commits
// nothing; its tasks stay queued for the next leader. Without the fence,
// such a late commit would land, and the next ledger would restore the
// task's lease only when it noticed, capacity being over its limit until
// then.
//
// What the ledger cannot close: refusals by platforms gather at the
// ledger of one term and
// are forgotten with it. A running task whose lease cannot be restored
// (its platform model is no longer a candidate) runs uncounted; the
// ledger logs it and tries at each poll. A task on a platform model a
// catalog removed while it ran (Target.Retired) is planned there by a
// planner that kept it, but one that never knew it (its process started
// after the catalog) cannot: the task then holds no lease there, the
// platform model is retired, and the task fails at its next step.
//
// # Storage
//
// The service meets its database at one seam, Store[TTx] (store.go), as
// River's client meets it at riverdriver.Driver[TTx]: TTx is the store's
// transaction type, *sql.Tx for the embedded SQLite store, pgx.Tx for
// PostgreSQL. The store hands out River's driver for its database, the
// transactions in which a task's change and its jobs commit together
// (InTx, TaskUpdateTx), River's migrations, and the reclaim of jobs left
// running, which River's public API does not offer; so this package
// names no database driver and no River driver. Only New is generic: the
// transaction type stays inside store.go, and Service is one type
// whatever the store.
package task
