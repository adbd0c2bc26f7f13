// Package console is Weir's web console, served by the gateway itself at
// "/": who is waiting for what, in which order and why, live.
//
// # What it shows
//
// Overview: per model, in flight against its limit, queued, admissions a
// second, queue wait p50 and p99 over the last 15 minutes, and how many
// requests queued and were then served instead of failing; each scope is
// counted once (one that several models use, such as an edge provider
// serving two, is a shared row of its own), and the totals count each
// request once (gateway.CountRequests). The figures are charted from
// a bounded in-memory ring of one point a second (Config.Window), with a
// strip of what needs attention first (failures in the last minute,
// paused, drained and orphaned scopes, capacity held for a passed-over
// waiter, limits changed at run time, disconnected nodes, a replica out
// of sync with its fleet). Scopes: each scope's limit, use, hold, queue,
// rate buckets and state. One scope's queue: its waiters in the order the
// engine will admit them (admission.Inspector), a page at a time, and its
// leases. Keys are shown by name, the id beside it (keyNames). Tasks,
// keys (with their usage over the last 24 hours, from the store) and
// edge nodes. Spend (spendview.go): what each key and group spent in the
// current UTC day, week or month, each against its budgets (the store's
// and the config file's, each in its own window, as a bar that turns
// amber at its first alert threshold and red when used up), and a chart
// of spend over the window, in total or for one key or group, read from
// the store's spend reports when the page asks.
//
// Actions, each confirmed in the page: cancel a task or a waiter, drain
// and resume a platform model (until lifted), set a scope's limit (until
// the next reload or restart of any replica), create and revoke keys.
// Drains and limits are kept in the store for every replica
// (gateway/operator.go says how long each lasts, and why). The console
// reads and acts through the roles services.go declares (the gateway's
// views, its operator's actions, its task front), never through the task
// service or the edge hub themselves.
//
// # Live
//
// The page holds one Server-Sent Events stream (/console/api/events). A
// sampler takes one snapshot a second, whether or not a page is open (the
// charts' history is the gateway's, not the page's), encodes it once and
// offers it to every stream. Each stream has room for one frame: a
// client that has not taken the last one gets the newer in its place, so
// nothing queues behind a slow client and the gateway never waits for
// one; a write that blocks past Config.WriteTimeout drops the client. A
// stream that fell behind or reconnected (the browser sends
// Last-Event-ID, the page ?since=) is sent the chart points it missed
// from the ring, so the charts have no gap. The request path pays only a
// map lookup and a few atomic adds per admission (Recorder).
//
// # Access
//
// The admin API's rule: with server.admin_token set, a login form takes
// the token and starts a session (a random id in an HttpOnly,
// SameSite=Strict cookie, Secure over TLS or with an https
// Config.PublicURL, expiring after Config.SessionTTL); the token as a
// bearer token also works (scripts, `weir queues --watch`). Without a
// token, loopback clients get in if server.admin_loopback trusts them,
// and nobody else does; and then a request must name a loopback host (or
// the public URL's) in Host, or it gets 403 before anything is read:
// another site's page whose name resolves to 127.0.0.1 (DNS rebinding)
// names its own (adminauth.TrustedHost). API keys never open it. The
// login form checks the token first: the right one always gets in, and
// only failures are limited, by how long their answer waits (loginGuard).
// Every action must come from the console's own page: SameSite=Strict, a
// Sec-Fetch-Site and Origin check, and a CSRF token (an HMAC of the
// session under a key made at start) in a header, which a page of
// another origin cannot read.
//
// # Front end
//
// Plain HTML, CSS and one ES module (assets/), embedded with embed and
// served as they are: no framework, no build step, nothing fetched from
// the internet at run time, and so no built files that can go stale and
// no Node in the Go build. The console is a handful of tables, six
// views and three kinds of line chart; a framework's components, a
// bundler and a charting library would each be larger than the whole
// page and a dependency to keep current. Charts are SVG paths drawn from
// the points; rendering is innerHTML from escaped strings on each
// snapshot, which for tables of this size is cheaper than it sounds and
// keeps the code one file that reads top to bottom. The browser tests
// (e2e, console_test.go, with playwright-core) drive it in Chromium.
package console
