package fleet

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
)

// logBuffer collects an engine's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// count counts the lines of the log that hold s.
func (l *logBuffer) count(s string) int {
	n := 0
	for line := range strings.Lines(l.String()) {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// protoLeader starts an engine "a" that speaks r leading epoch 1 on a
// loopback listener, and returns it, its listener's address and its log.
func protoLeader(t *testing.T, r protoRange) (*Engine, string, *logBuffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var log logBuffer
	e := New(Config{Replica: "a", Gen: 1, Secret: testSecret, SessionTimeout: 2 * time.Second, protocol: r, Logger: log.logger()})
	go e.Serve(ln)
	t.Cleanup(func() { ln.Close() })
	t.Cleanup(e.Close)
	e.SetTerm(Term{Epoch: 1, Leader: "a", Addr: ln.Addr().String()}, true, []string{"a"})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := e.Ready(ctx); err != nil {
		t.Fatalf("the leader is not ready: %v", err)
	}
	return e, ln.Addr().String(), &log
}

// protoFollower starts an engine "b" that speaks r following the leader
// of epoch 1 at addr, and returns it and its log.
func protoFollower(t *testing.T, r protoRange, addr string) (*Engine, *logBuffer) {
	t.Helper()
	var log logBuffer
	e := New(Config{Replica: "b", Gen: 1, Secret: testSecret, SessionTimeout: 2 * time.Second, protocol: r, Logger: log.logger()})
	t.Cleanup(e.Close)
	e.SetTerm(Term{Epoch: 1, Leader: "a", Addr: addr}, false, nil)
	return e, &log
}

// synced waits until e has synced with its leader.
func synced(t *testing.T, e *Engine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := e.Ready(ctx); err != nil {
		t.Fatalf("the replica did not sync with its leader: %v", err)
	}
}

// peerProto is the protocol version of replica's session as leader e
// sees it; 0 if it has none.
func peerProto(e *Engine, replica string) int {
	e.mu.Lock()
	l := e.lead
	e.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if p := l.peers[replica]; p != nil {
		return p.proto
	}
	return 0
}

// TestProtocolSameVersion: a replica of this build and a leader of this
// build run their session at this build's newest version.
func TestProtocolSameVersion(t *testing.T) {
	t.Parallel()
	lead, addr, _ := protoLeader(t, buildProtocol)
	f, _ := protoFollower(t, buildProtocol, addr)
	synced(t, f)
	if got := f.Protocol(); got.Version != protoMax || got.Refused != "" || got.Min != protoMin || got.Max != protoMax {
		t.Errorf("the replica's protocol %+v; want version %d, %d..%d, nothing refused", got, protoMax, protoMin, protoMax)
	}
	if got := peerProto(lead, "b"); got != protoMax {
		t.Errorf("the leader runs the replica's session at version %d; want %d", got, protoMax)
	}
	if got := lead.Protocol(); got.Version != protoMax {
		t.Errorf("the leader's own protocol version %d; want %d", got.Version, protoMax)
	}
}

// TestProtocolOlderReplicaWithoutVersion: a hello that names no version
// (a build older than the versions) is version 1's: a leader that
// speaks 1 welcomes it at 1, and serves its calls.
func TestProtocolOlderReplicaWithoutVersion(t *testing.T) {
	t.Parallel()
	lead, addr, _ := protoLeader(t, protoRange{1, 3})
	nc := dialFrom(t, addr, "")
	br := bufio.NewReader(nc)
	sendFrame(t, nc, map[string]any{"op": "hello", "epoch": 1, "replica": "old", "gen": 1, "secret": testSecret})
	w := readFrame(t, nc, br)
	if w.Op != opWelcome || w.Err != nil || w.Proto != 1 || w.ProtoMin != 1 || w.ProtoMax != 3 {
		t.Fatalf("a hello without a version answered with %+v; want a welcome at version 1 naming 1..3", w)
	}
	if got := peerProto(lead, "old"); got != 1 {
		t.Errorf("the leader runs the old replica's session at version %d; want 1", got)
	}
	sendFrame(t, nc, frame{ID: 1, Op: opScopes, Epoch: 1})
	for {
		if f := readFrame(t, nc, br); f.Op == opReply && f.ID == 1 {
			if f.Err != nil {
				t.Fatalf("the old replica's call refused: %+v", f.Err)
			}
			break
		}
	}
}

// oldLeader serves, on a loopback listener, the leader of epoch 1 as a
// build older than the versions does: a welcome that names no version,
// and an empty reply to every call. It counts the sessions dialed.
func oldLeader(t *testing.T) (addr string, dials *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	dials = new(atomic.Int64)
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			go func() {
				defer nc.Close()
				r := newReader(nc)
				if _, err := r.next(); err != nil {
					return
				}
				_, _ = nc.Write([]byte(`{"op":"welcome","epoch":1}` + "\n"))
				r.authenticated()
				for {
					f, err := r.next()
					if err != nil {
						return
					}
					if f.ID != 0 && f.Op != opAck {
						_, _ = nc.Write([]byte(`{"op":"reply","epoch":1,"id":` + strconv.FormatUint(f.ID, 10) + "}\n"))
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), dials
}

// TestProtocolOlderLeaderWithoutVersion: a welcome that names no
// version is version 1's: a replica that speaks 1 runs the session at
// 1 and syncs.
func TestProtocolOlderLeaderWithoutVersion(t *testing.T) {
	t.Parallel()
	addr, _ := oldLeader(t)
	f, _ := protoFollower(t, protoRange{1, 2}, addr)
	synced(t, f)
	if got := f.Protocol(); got.Version != 1 || got.Refused != "" {
		t.Errorf("the replica's protocol with an old leader %+v; want version 1, nothing refused", got)
	}
}

// TestProtocolNewerReplicaOverlaps: a replica whose range reaches past
// the leader's, or starts above its minimum, runs at the highest version
// both speak.
func TestProtocolNewerReplicaOverlaps(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name           string
		leader, follow protoRange
		want           int
	}{
		{"newer replica", protoRange{1, 2}, protoRange{2, 3}, 2},
		{"replica reaching past", protoRange{1, 1}, protoRange{1, 3}, 1},
		{"newer leader", protoRange{2, 4}, protoRange{1, 3}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			lead, addr, _ := protoLeader(t, c.leader)
			f, _ := protoFollower(t, c.follow, addr)
			synced(t, f)
			if got := f.Protocol().Version; got != c.want {
				t.Errorf("the replica (%s) runs its session with the leader (%s) at version %d; want %d", c.follow, c.leader, got, c.want)
			}
			if got := peerProto(lead, "b"); got != c.want {
				t.Errorf("the leader (%s) runs the replica's (%s) session at version %d; want %d", c.leader, c.follow, got, c.want)
			}
		})
	}
}

// TestProtocolNoOverlapRefusedOnBothSides: a replica and a leader that
// speak no version in common: the leader refuses the session and says
// why in its log and its count; the replica says why (its log, its
// Protocol, for /readyz), admits nothing through that leader, and does
// not dial it again in its term. A newer leader's term ends that.
func TestProtocolNoOverlapRefusedOnBothSides(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name           string
		leader, follow protoRange
		advice         string
	}{
		{"older replica", protoRange{3, 4}, protoRange{1, 2}, "upgrade it to the leader's build"},
		{"newer replica", protoRange{1, 1}, protoRange{2, 3}, "needs the fleet stopped first"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			lead, addr, leadLog := protoLeader(t, c.leader)
			f, followLog := protoFollower(t, c.follow, addr)
			var refused ProtocolState
			waitFor(t, "the replica to say it was refused", func() bool {
				refused = f.Protocol()
				return refused.Refused != ""
			})
			for _, want := range []string{"speaks fleet protocol " + c.follow.String(), "leader a speaks " + c.leader.String(), c.advice} {
				if !strings.Contains(refused.Refused, want) {
					t.Errorf("the replica's refusal %q does not say %q", refused.Refused, want)
				}
			}
			if refused.Version != 0 || refused.Refusals != 1 {
				t.Errorf("the refused replica's protocol %+v; want no version and one refusal", refused)
			}
			waitFor(t, "the replica's log line", func() bool {
				return followLog.count("cannot speak its leader's protocol") == 1
			})
			if n := leadLog.count("refused a replica that speaks no protocol version in common"); n != 1 {
				t.Errorf("the leader logged the refusal %d times; want once:\n%s", n, leadLog)
			}
			if got := lead.Protocol().Refusals; got != 1 {
				t.Errorf("the leader counted %d refusals; want 1", got)
			}
			if got := peerProto(lead, "b"); got != 0 {
				t.Errorf("the leader holds the refused replica as a peer at version %d; want none", got)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			if err := f.Ready(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("the refused replica's Ready: %v; want it never synced", err)
			}
			if got := lead.Protocol().Refusals; got != 1 {
				t.Errorf("the leader refused %d sessions; want the replica not to dial again in the term", got)
			}
		})
	}
}

// TestProtocolOldReplicaRefusedSaysWhy: a hello that names no version,
// at a leader that no longer speaks version 1, is answered with the
// refusal's reason (which an older build logs) and closed.
func TestProtocolOldReplicaRefusedSaysWhy(t *testing.T) {
	t.Parallel()
	_, addr, leadLog := protoLeader(t, protoRange{2, 3})
	for range 2 {
		nc := dialFrom(t, addr, "")
		br := bufio.NewReader(nc)
		sendFrame(t, nc, map[string]any{"op": "hello", "epoch": 1, "replica": "old", "gen": 1, "secret": testSecret})
		w := readFrame(t, nc, br)
		if w.Op != opWelcome || w.Err == nil || w.Err.Kind != "protocol" ||
			!strings.Contains(w.Err.Message, "replica old speaks fleet protocol 1 and leader a speaks 2..3") {
			t.Fatalf("an old replica's hello answered with %+v; want a refusal naming both versions", w)
		}
		if !errors.Is(w.Err.err(), ErrProtocol) {
			t.Errorf("the refusal decodes to %v; want ErrProtocol", w.Err.err())
		}
		if !closedWithin(nc, 5*time.Second) {
			t.Fatal("the refused session is still open")
		}
	}
	if n := leadLog.count("refused a replica that speaks no protocol version in common"); n != 1 {
		t.Errorf("the leader logged %d refusals of one replica generation dialing twice; want 1", n)
	}
}

// TestProtocolOldLeaderRefusedByNewReplica: a replica that no longer
// speaks version 1 refuses the welcome of a leader that names no
// version, on its own side, and does not dial it again in its term.
func TestProtocolOldLeaderRefusedByNewReplica(t *testing.T) {
	t.Parallel()
	addr, dials := oldLeader(t)
	f, log := protoFollower(t, protoRange{2, 3}, addr)
	waitFor(t, "the replica to refuse the old leader", func() bool { return f.Protocol().Refused != "" })
	if got := f.Protocol().Refused; !strings.Contains(got, "replica b speaks fleet protocol 2..3 and leader a speaks 1") {
		t.Errorf("the replica's refusal %q; want both versions named", got)
	}
	if n := log.count("cannot speak its leader's protocol"); n != 1 {
		t.Errorf("the replica logged %d refusals; want 1:\n%s", n, log)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := f.Ready(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the replica's Ready: %v; want it never synced", err)
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("the replica dialed the old leader %d times; want once in its term", n)
	}
	// A new term: the refusal is forgotten, and the new leader dialed.
	f.SetTerm(Term{Epoch: 2, Leader: "c", Addr: addr}, false, nil)
	if got := f.Protocol().Refused; got != "" {
		t.Errorf("after a new term the replica still says %q; want it cleared", got)
	}
	waitFor(t, "the new term's leader dialed", func() bool { return dials.Load() == 2 })
}

// TestProtocolRefusedRunsNoShare: a replica whose leader refused its
// protocol does not run open, though its scope fails open and no leader
// answers it: that leader decides for the others, and a share of its
// own would come on top of theirs.
func TestProtocolRefusedRunsNoShare(t *testing.T) {
	t.Parallel()
	_, addr, _ := protoLeader(t, protoRange{1, 1})
	e := New(Config{Replica: "b", Gen: 1, Secret: testSecret, SessionTimeout: 2 * time.Second,
		Unavailable: 50 * time.Millisecond, protocol: protoRange{2, 2}})
	t.Cleanup(e.Close)
	ctx := t.Context()
	_ = e.SetScope(ctx, "open", admission.ScopeConfig{Limit: 4, FailOpen: true}) // recorded; no leader to take it
	e.SetTerm(Term{Epoch: 1, Leader: "a", Addr: addr}, false, []string{"a", "b"})
	waitFor(t, "the replica refused", func() bool { return e.Protocol().Refused != "" })
	if _, err := e.TryAcquire(ctx, admission.Request{ID: "r", Candidates: []admission.Candidate{one("open")}}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a fail-open scope on a refused replica: %v; want ErrUnavailable", err)
	}
	if running, _ := e.Open(); running {
		t.Error("the refused replica runs open")
	}
}
