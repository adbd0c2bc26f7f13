package fleet

import (
	"errors"
	"fmt"
	"strconv"
)

// The session protocol's versions. A replica's hello names the range of
// versions it speaks (proto_min..proto_max); the leader's welcome names
// its own range and the session's version (proto), the highest both
// speak. A hello or welcome that names no version is version 1's: the
// fields are ones an older peer drops unread, so naming them changed
// nothing an older peer sees. Where the ranges do not meet, the leader
// refuses the session with ErrProtocol, whose message names both ranges
// and what to do; a replica that finds no version in common with its
// leader's welcome (a leader that names none, when this build no longer
// speaks version 1) refuses it likewise on its own side. Either way the
// replica does not dial that leader again: a leader speaks the versions
// of its build for the whole of its term, so it waits for the next term,
// serving as it would without a leader (see the package doc, "Rolling
// upgrades").
//
// A frame or field that an older peer would misread, or whose loss would
// matter, comes with a new version: protoMax goes up, and it is sent only
// on a session whose version has it (peer.proto at the leader,
// route.proto at a replica). One that an older peer may ignore or refuse
// harmlessly needs none (wire.go).
const (
	// protoV1 is the protocol of every build whose hello names no
	// version.
	protoV1 = 1
	// protoV2's frames are version 1's. What it says is the leader's
	// build: one that plans tasks of the kinds added since version 1
	// (transcription), which a version 1 leader would end as having no
	// candidate. A replica takes such tasks only on a session of version
	// 2 or more (ProtocolTaskKinds).
	protoV2 = 2
	// protoMin and protoMax are the versions this build speaks. Raising
	// protoMin drops an older build's: an upgrade past it needs the
	// fleet stopped (docs/upgrades.md).
	protoMin = protoV1
	protoMax = protoV2
)

// ProtocolTaskKinds is the fleet protocol version from which a leader
// plans tasks of a kind that older leaders cannot: transcription tasks
// need version 2.
const ProtocolTaskKinds = protoV2

// ErrProtocol refuses a session between a replica and a leader that
// speak no version of the protocol in common.
var ErrProtocol = errors.New("no fleet protocol version in common")

// protoRange is the versions one side speaks, Min to Max.
type protoRange struct{ Min, Max int }

// buildProtocol is the versions this build speaks (Config.protocol's
// default).
var buildProtocol = protoRange{Min: protoMin, Max: protoMax}

func (r protoRange) String() string {
	if r.Min == r.Max {
		return strconv.Itoa(r.Min)
	}
	return fmt.Sprintf("%d..%d", r.Min, r.Max)
}

// common is the highest version both r and o speak; false if none.
func (r protoRange) common(o protoRange) (int, bool) {
	v := min(r.Max, o.Max)
	if v < max(r.Min, o.Min) {
		return 0, false
	}
	return v, true
}

// has reports whether r includes version v.
func (r protoRange) has(v int) bool { return r.Min <= v && v <= r.Max }

// protoRange is the range a hello or welcome names: version 1 if it
// names none, its maximum alone if it names no minimum.
func (f *frame) protoRange() protoRange {
	if f.ProtoMax <= 0 {
		return protoRange{Min: protoV1, Max: protoV1}
	}
	lo := f.ProtoMin
	if lo <= 0 || lo > f.ProtoMax {
		lo = f.ProtoMax
	}
	return protoRange{Min: lo, Max: f.ProtoMax}
}

// withRange sets the range f names to r, and returns f.
func (f *frame) withRange(r protoRange) *frame {
	f.ProtoMin, f.ProtoMax = r.Min, r.Max
	return f
}

// protocolMismatch is the refusal of a session between replica, which
// speaks rr, and the leader, which speaks lr: both ranges, and what the
// operator does about it.
func protocolMismatch(replica string, rr protoRange, leader string, lr protoRange) error {
	what := fmt.Sprintf("replica %s is older than leader %s can serve: upgrade it to the leader's build", replica, leader)
	if rr.Min > lr.Max {
		what = fmt.Sprintf("replica %s is newer than leader %s can serve: upgrading past protocol %s needs the fleet stopped first", replica, leader, lr)
	}
	return fmt.Errorf("%w: replica %s speaks fleet protocol %s and leader %s speaks %s; %s (docs/upgrades.md); until then %s admits nothing through this leader",
		ErrProtocol, replica, rr, leader, lr, what, replica)
}

// ProtocolState is the protocol as a replica speaks it with its leader.
type ProtocolState struct {
	// Version is the version of this replica's session with its leader
	// (its build's newest while it leads); 0 while it has none.
	Version int
	// Min and Max are the versions this replica's build speaks.
	Min, Max int
	// Refused, while this replica and its term's leader speak no version
	// in common, says so: both ranges and what to do. "" otherwise.
	Refused string
	// Refusals counts the sessions refused for want of a common version:
	// by this replica's leader, by this replica of its leader's welcome,
	// and by this replica while it led.
	Refusals uint64
}

// Protocol returns the protocol as this replica speaks it now.
func (e *Engine) Protocol() ProtocolState {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := ProtocolState{Min: e.cfg.protocol.Min, Max: e.cfg.protocol.Max, Refused: e.protoRefused, Refusals: e.protoRefusals}
	if e.rt != nil {
		st.Version = e.rt.proto
	}
	return st
}

// refusedByLeader notes that this replica and t's leader speak no
// version in common (err says why), logging it once for the term. The
// replica stops running open, if it did, and does not start: its callers
// wait for a leader it can speak with, or fail when they time out.
func (e *Engine) refusedByLeader(t Term, err error) {
	e.mu.Lock()
	first := e.protoRefused == "" && e.term.Epoch == t.Epoch
	var retired *open
	if e.term.Epoch == t.Epoch {
		e.protoRefused = err.Error()
		retired = e.retireOpenLocked()
	}
	e.protoRefusals++
	e.mu.Unlock()
	if retired != nil {
		retired.mem.Close()
	}
	if first {
		e.cfg.Logger.Error("fleet: this replica cannot speak its leader's protocol; it waits for the next leader and admits nothing meanwhile",
			"leader", t.Leader, "epoch", t.Epoch, "replica_protocol", e.cfg.protocol.String(), "error", err)
	}
}

// refuseProtocol counts a session this leader refuses for want of a
// common version (err says why), and logs it once for each generation
// of the replica in the term: an older build dials again and again.
func (l *leader) refuseProtocol(hello *frame, err error) {
	l.mu.Lock()
	first := l.refusedGen[hello.Replica] != hello.Gen
	l.refusedGen[hello.Replica] = hello.Gen
	l.mu.Unlock()
	if l.countRefusal != nil {
		l.countRefusal()
	}
	if first {
		l.logger.Error("fleet: refused a replica that speaks no protocol version in common with this leader",
			"replica", hello.Replica, "gen", hello.Gen, "epoch", l.epoch, "leader_protocol", l.cfg.protocol.String(),
			"replica_protocol", hello.protoRange().String(), "error", err)
	}
}

// countRefusal counts a session refused for want of a common version.
func (e *Engine) countRefusal() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.protoRefusals++
}

// waitNextTerm returns once t is no longer the engine's term, or the
// engine closes: what a replica does whose leader it cannot speak with.
func (e *Engine) waitNextTerm(t Term) {
	for {
		e.mu.Lock()
		changed, current := e.changed, !e.closed && e.term.Epoch == t.Epoch
		e.mu.Unlock()
		if !current {
			return
		}
		select {
		case <-changed:
		case <-e.stop:
			return
		}
	}
}
