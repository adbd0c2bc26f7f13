package e2e

// Task webhooks against real receivers in the test process: Standard
// Webhooks signatures that webhook.Signer.Verify accepts, a failed
// delivery retried after the schedule's first delay with the same
// webhook-id, 410 ending the retries and the task's later events, and
// callback URLs that would reach
// internal addresses refused — at the API when the URL says so, and when
// the connection is dialled when only a name lookup or a redirect does.

import (
	"database/sql"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
	"github.com/weir-gateway/weir/webhook"
)

// hookJob waits until the task's webhook job satisfies cond, and returns
// it.
func hookJob(t *testing.T, g *gateway, taskID string, within time.Duration, what string, cond func(riverJob) bool) riverJob {
	t.Helper()
	db := openDB(t, g.DB)
	var last riverJob
	waitFor(t, within, what, func() bool {
		for _, j := range riverJobs(t, db, "weir_task_webhook") {
			if j.TaskID == taskID {
				last = j
				return cond(j)
			}
		}
		return false
	})
	return last
}

// TestTaskWebhookSignedAndRetried: the receiver fails the first delivery
// (500) and takes the second. Both carry the same webhook-id, verify with
// the gateway's secret (and not with another), and the second comes after
// the schedule's first delay (5s, ±10% jitter; River's scheduler moves a
// retry due in 5s or more on its next run, up to 5s later).
func TestTaskWebhookSignedAndRetried(t *testing.T) {
	t.Parallel()
	c := startCrashRig(t, mock.Config{}, taskOptions{Workers: 2}, func(n int, _ delivery, _ *http.Request) int {
		if n == 0 {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})
	o, _ := c.g.submitTask(t, c.key, taskBody("signed", c.hooks.URL), "")
	if o.CallbackURL != c.hooks.URL {
		t.Errorf("callback_url %q, want %q", o.CallbackURL, c.hooks.URL)
	}
	waitFor(t, 20*time.Second, "the webhook to be delivered twice", func() bool { return len(c.hooks.deliveries()) >= 2 })
	ds := c.hooks.deliveries()
	first, second := ds[0], ds[1]
	for i, d := range ds[:2] {
		if d.Verified != nil {
			t.Errorf("delivery %d does not verify: %v", i, d.Verified)
		}
		if d.Event.Type != "task.succeeded" || d.Event.Data.ID != o.ID || d.Event.Data.Status != "succeeded" {
			t.Errorf("delivery %d: event %+v, want task.succeeded for %s", i, d.Event, o.ID)
		}
		if d.Header.Get("Content-Type") != "application/json" {
			t.Errorf("delivery %d: Content-Type %q", i, d.Header.Get("Content-Type"))
		}
	}
	if first.ID == "" || first.ID != second.ID {
		t.Errorf("webhook-id %q then %q, want the same id on a retry", first.ID, second.ID)
	}
	_, other := newSecret(t)
	if err := other.Verify(first.Header, first.Body, time.Now(), 0); err == nil {
		t.Error("the delivery verifies with another secret too")
	}
	tampered := append([]byte(nil), first.Body...)
	tampered[len(tampered)-2] ^= 1
	if err := c.hooks.signer.Verify(first.Header, tampered, time.Now(), 0); err == nil {
		t.Error("a changed body still verifies")
	}
	gap := second.At.Sub(first.At)
	if gap < 4500*time.Millisecond || gap > 15*time.Second {
		t.Errorf("retry %s after the first delivery, want the schedule's 5s (±10%%) plus at most River's 5s scheduler interval", gap)
	}
	j := hookJob(t, c.g, o.ID, 10*time.Second, "the webhook job to complete", func(j riverJob) bool { return j.State == "completed" })
	if j.Attempt != 2 || j.EventID != first.ID {
		t.Errorf("webhook job %+v, want completed on attempt 2 with event id %s", j, first.ID)
	}
	if len(c.hooks.deliveries()) != 2 {
		t.Errorf("%d deliveries, want 2", len(c.hooks.deliveries()))
	}
	t.Logf("retried after %s with webhook-id %s", gap.Round(time.Millisecond), first.ID)
}

// TestTaskWebhookGoneStopsRetries: a receiver answering 410 gets one
// delivery, and the delivery job is cancelled rather than scheduled again.
func TestTaskWebhookGoneStopsRetries(t *testing.T) {
	t.Parallel()
	c := startCrashRig(t, mock.Config{}, taskOptions{Workers: 2}, func(int, delivery, *http.Request) int { return http.StatusGone })
	o, _ := c.g.submitTask(t, c.key, taskBody("gone", c.hooks.URL), "")
	j := hookJob(t, c.g, o.ID, 20*time.Second, "the webhook job to end", func(j riverJob) bool {
		return j.State != "available" && j.State != "running" && j.State != "scheduled"
	})
	if j.State != "cancelled" || j.Attempt != 1 {
		t.Errorf("after a 410 the webhook job is %s on attempt %d, want cancelled on attempt 1 (errors %s)", j.State, j.Attempt, j.Errors)
	}
	if n := len(c.hooks.deliveries()); n != 1 {
		t.Errorf("%d deliveries, want 1", n)
	}
	if got := c.g.getTask(t, c.key, o.ID).Status; got != "succeeded" {
		t.Errorf("task %s after its webhook was gone, want succeeded", got)
	}
}

// TestTaskWebhookGoneEndsTheTasksEvents: a task asking for progress
// events runs a 3s job; its receiver answers 410 to task.running, and
// then gets nothing more: the terminal event is dropped unsent, though
// the task itself succeeds. The 410 is kept in the task's row.
func TestTaskWebhookGoneEndsTheTasksEvents(t *testing.T) {
	t.Parallel()
	c := startCrashRig(t, mock.Config{JobDuration: 3 * time.Second}, taskOptions{Workers: 2}, func(int, delivery, *http.Request) int { return http.StatusGone })
	o, _ := c.g.submitTask(t, c.key, progressTaskBody("gone for good", c.hooks.URL, []string{"progress"}), "")
	if got := c.g.waitTerminal(t, c.key, []string{o.ID}, 30*time.Second)[o.ID].Status; got != "succeeded" {
		t.Fatalf("task %s, want succeeded", got)
	}
	db := openDB(t, c.g.DB)
	var jobs []riverJob
	waitFor(t, 20*time.Second, "the task's webhook jobs to end", func() bool {
		jobs = jobs[:0]
		for _, j := range riverJobs(t, db, "weir_task_webhook") {
			if j.TaskID != o.ID {
				continue
			}
			jobs = append(jobs, j)
			if j.State == "available" || j.State == "running" || j.State == "scheduled" || j.State == "retryable" {
				return false
			}
		}
		return len(jobs) > 0
	})
	for _, j := range jobs {
		if j.State != "cancelled" || j.Attempt != 1 {
			t.Errorf("webhook job %s: %s on attempt %d, want cancelled on attempt 1 (errors %s)", j.EventID, j.State, j.Attempt, j.Errors)
		}
	}
	// The terminal event is not queued when the task ends after the 410
	// was recorded, and cancelled unsent when it was queued before.
	if len(jobs) > 2 || (len(jobs) == 2 && !strings.Contains(jobs[1].Errors, "410")) {
		t.Errorf("webhook jobs %+v, want task.running's and at most the terminal event's, cancelled for the earlier 410", jobs)
	}
	ds := c.hooks.deliveries()
	if len(ds) != 1 || ds[0].Event.Type != "task.running" {
		var types []string
		for _, d := range ds {
			types = append(types, d.Event.Type)
		}
		t.Errorf("deliveries %v, want task.running alone", types)
	}
	var gone sql.NullString
	if err := db.QueryRow(`SELECT callback_gone_at FROM tasks WHERE id = ?`, o.ID).Scan(&gone); err != nil || !gone.Valid {
		t.Errorf("callback_gone_at %v (%v), want the time of the 410", gone, err)
	}
}

// ssrfCorpus are callback URLs that name, in one spelling or another, a
// loopback, private, link-local, metadata or otherwise internal address.
var ssrfCorpus = []string{
	"http://127.0.0.1/hook",
	"http://127.0.0.1:8080/hook",
	"http://127.1/hook",                   // short form: 127.0.0.1 to inet_aton and browsers
	"http://2130706433/hook",              // decimal 127.0.0.1
	"http://0x7f000001/hook",              // hex
	"http://0177.0.0.1/hook",              // octal
	"http://[::1]/hook",                   // IPv6 loopback
	"http://[::ffff:127.0.0.1]/hook",      // IPv4-mapped IPv6
	"http://[::ffff:a9fe:a9fe]/hook",      // IPv4-mapped 169.254.169.254
	"http://[0:0:0:0:0:ffff:7f00:1]/hook", // the same, written out
	"http://169.254.169.254/latest/meta-data/",
	"http://[fe80::1]/hook", // IPv6 link-local
	"http://10.0.0.1/hook",  // RFC 1918
	"http://172.16.0.1/hook",
	"http://192.168.1.1/hook",
	"http://100.64.0.1/hook", // CGNAT
	"http://[fd00::1]/hook",  // unique local
	"http://0.0.0.0/hook",
	"http://[::]/hook",
	"http://localhost/hook",
	"http://LOCALHOST./hook",
	"http://api.localhost/hook",
	"http://user:pass@example.com/hook", // userinfo
	"ftp://example.com/hook",            // scheme
	"file:///etc/passwd",
	"/relative/hook",
}

// TestTaskCallbackSSRF runs a gateway that does not allow loopback
// callbacks. Every URL of the corpus is refused with 400 and nothing is
// stored; a name that only resolves to loopback passes the API (names are
// not resolved there) and is refused when the delivery dials it.
func TestTaskCallbackSSRF(t *testing.T) {
	t.Parallel()
	up := startVideoUpstream(t, mock.Config{})
	secret, signer := newSecret(t)
	g := startGateway(t, "", videoCatalog(up.URL, taskOptions{Workers: 2, Secret: secret}))
	_, key := g.createKey(t)
	for _, u := range ssrfCorpus {
		rep := g.do(t, request{Path: "/v1/tasks", Key: key, Body: taskBody("ssrf", u)})
		e := checkError(t, rep, http.StatusBadRequest, "invalid_request")
		if e.Param == nil || *e.Param != "callback_url" {
			t.Errorf("%s: error param %v, want callback_url (%s)", u, e.Param, e.Message)
		}
	}
	if n := len(g.listTasks(t, key)); n != 0 {
		t.Errorf("%d tasks stored from refused submissions", n)
	}

	// A name that resolves only to loopback (this machine's own name, in
	// /etc/hosts).
	host := loopbackName(t)
	var got atomic.Int32
	h := startReceiver(t, signer, func(int, delivery, *http.Request) int { got.Add(1); return http.StatusOK })
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(strings.TrimSuffix(h.URL, "/hook"), "http://"))
	callback := "http://" + net.JoinHostPort(host, port) + "/hook"
	o, status := g.submitTask(t, key, taskBody("rebind", callback), "")
	if status != http.StatusAccepted {
		t.Fatalf("a callback naming %s: %d, want 202 (names are checked when dialled)", host, status)
	}
	j := hookJob(t, g, o.ID, 20*time.Second, "the webhook job to end", func(j riverJob) bool {
		return j.State == "cancelled" || j.State == "completed" || j.State == "retryable" || j.State == "discarded"
	})
	if j.State != "cancelled" || !strings.Contains(j.Errors, "loopback") {
		t.Errorf("webhook to %s (loopback) ended %s with errors %s, want cancelled as a forbidden address", callback, j.State, j.Errors)
	}
	if got.Load() != 0 {
		t.Errorf("the receiver behind %s got %d deliveries", callback, got.Load())
	}
}

// loopbackName returns a host name that resolves only to loopback
// addresses here (the machine's own name), or skips the test.
func loopbackName(t *testing.T) string {
	t.Helper()
	for _, name := range []string{hostname(), "vm", "runsc"} {
		if name == "" || name == "localhost" {
			continue
		}
		ips, err := net.LookupIP(name)
		if err != nil || len(ips) == 0 {
			continue
		}
		if !slices.ContainsFunc(ips, func(ip net.IP) bool { return !ip.IsLoopback() }) {
			return name
		}
	}
	t.Skip("no host name here resolves only to loopback")
	return ""
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// internalAddr returns an address of this machine that is neither
// loopback nor public (private, unique-local or a documentation range), on
// which the test can listen, or "" if there is none.
func internalAddr() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		if webhook.ValidateURL("http://"+net.JoinHostPort(ipn.IP.String(), "80")+"/") != nil {
			return ipn.IP.String()
		}
	}
	return ""
}

// TestTaskWebhookRedirectToInternal: on a gateway that allows loopback
// callbacks (for the receiver) but not private ones, a receiver that
// redirects (307) to an internal address of this machine does not get the
// event delivered there: the internal listener sees no connection. The
// same internal address given as the callback URL is refused at the API.
func TestTaskWebhookRedirectToInternal(t *testing.T) {
	t.Parallel()
	ip := internalAddr()
	if ip == "" {
		t.Skip("no internal (non-loopback, non-public) address to listen on")
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	var accepted atomic.Int32
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			conn.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	internal := "http://" + ln.Addr().String() + "/hook"
	// The listener is reachable from here: a redirect followed would land.
	if conn, err := net.Dial("tcp", ln.Addr().String()); err != nil {
		t.Skipf("the internal listener is not reachable: %v", err)
	} else {
		conn.Close()
	}
	waitFor(t, 5*time.Second, "the probe connection to be accepted", func() bool { return accepted.Load() == 1 })

	c := startCrashRig(t, mock.Config{}, taskOptions{Workers: 2}, nil)
	rep := c.g.do(t, request{Path: "/v1/tasks", Key: c.key, Body: taskBody("internal", internal)})
	checkError(t, rep, http.StatusBadRequest, "invalid_request")

	var redirected atomic.Int32
	rd := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		redirected.Add(1)
		http.Redirect(w, r, internal, http.StatusTemporaryRedirect)
	}), ReadHeaderTimeout: 10 * time.Second}
	rln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = rd.Serve(rln) }()
	t.Cleanup(func() { rd.Close() })
	o, _ := c.g.submitTask(t, c.key, taskBody("redirect", "http://"+rln.Addr().String()+"/hook"), "")
	j := hookJob(t, c.g, o.ID, 20*time.Second, "the first delivery attempt to end", func(j riverJob) bool {
		return j.State != "available" && j.State != "running"
	})
	if redirected.Load() == 0 {
		t.Fatalf("the redirecting receiver got no delivery; webhook job %+v", j)
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("the internal address got %d connections after the redirect, want none", n-1)
	}
	if j.State == "completed" {
		t.Errorf("the redirected delivery completed: %+v", j)
	}
	var errs []struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal([]byte(j.Errors), &errs)
	t.Logf("redirect to %s: webhook job %s after attempt %d: %v", internal, j.State, j.Attempt, errs)
}
