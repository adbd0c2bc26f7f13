package fleet

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"time"

	"github.com/weir-gateway/weir/admission"
)

// The session protocol: one TCP connection from each replica to the
// leader, carrying JSON frames, one per line, both ways. A replica's
// calls are frames with an ID; the leader answers each with a frame of the
// same ID and op "reply". The leader pushes "notify" frames (a waiter's
// lease or error), each of which the replica acknowledges with an "ack"
// of the same ID once it has handed the outcome to its caller. Either side
// sends "ping" when it has sent nothing for a while; a side that hears
// nothing for the session timeout closes the connection.
//
// A session begins with the replica's "hello" (its id and generation,
// the term's epoch and the fleet's secret), which the listener reads and
// checks before anything else, and the leader's "welcome": until then
// neither side reads a frame longer than maxHello (handshake.go).
//
// The hello and welcome name the protocol's versions each side speaks,
// and the session runs at the highest both do (protocol.go). Within a
// version, what is added keeps an older peer working: a leader answers
// an op it does not know with an error (ErrInvalid) that no call waits
// for, a replica ignores one, and JSON drops a field it does not know.
// So a leader of a build older than the "affinity" frames neither passes
// them on nor re-resolves a request that "resolves", and a replica of
// such a build shares no affinity; each then behaves as before. Likewise
// a leader older than a request's "spec" adds no candidate to another
// replica's waiter, and a replica older than it sends none. What an
// older peer would misread needs a new version.

// Frame ops.
const (
	opHello       = "hello"
	opWelcome     = "welcome"
	opReply       = "reply"
	opNotify      = "notify"
	opAck         = "ack"
	opPing        = "ping"
	opSync        = "sync"
	opSetScope    = "set_scope"
	opRemoveScope = "remove_scope"
	opScope       = "scope"
	opScopes      = "scopes"
	opEnqueue     = "enqueue"
	opTryAcquire  = "try_acquire"
	opCancel      = "cancel"
	opPosition    = "position"
	opRenew       = "renew"
	opRelease     = "release"
	opReconcile   = "reconcile"
	opRestore     = "restore"
	opFence       = "fence"
	opActivate    = "activate"
	// mirror: the leader's copy, to a replica synced with it, of the
	// leases no live replica could re-assert to the next leader
	// (mirror.go); answered by nobody.
	opMirror = "mirror"
	// opAffinity (affinity.go) carries cache-affinity entries, posted
	// by a replica and passed on by the leader; answered by nobody.
)

// maxFrame bounds one frame of an authenticated session: a replica's
// whole state in a sync frame is the largest, and a peer that sends more
// is cut off rather than let exhaust memory.
const maxFrame = 64 << 20

// maxHello bounds a frame read before the session is authenticated: the
// hello a listener reads, and the welcome a replica that dialed reads.
// Both are a few hundred bytes; a peer that has not shown the fleet's
// secret is never buffered more than this and the reader's buffer.
const maxHello = 8 << 10

// frame is one message. Only the fields its op uses are set.
type frame struct {
	ID    uint64 `json:"id,omitempty"`
	Op    string `json:"op"`
	Epoch uint64 `json:"epoch,omitempty"`

	// hello
	Replica string `json:"replica,omitempty"`
	Gen     uint64 `json:"gen,omitempty"`
	Secret  string `json:"secret,omitempty"`
	// hello and welcome: the protocol versions the sender speaks; the
	// welcome's Proto is the session's (protocol.go).
	ProtoMin int `json:"proto_min,omitempty"`
	ProtoMax int `json:"proto_max,omitempty"`
	Proto    int `json:"proto,omitempty"`

	// arguments
	Scope   string                 `json:"scope,omitempty"`
	Config  *admission.ScopeConfig `json:"config,omitempty"`
	Req     *wireRequest           `json:"req,omitempty"`
	Cand    int                    `json:"cand,omitempty"`
	Waiter  string                 `json:"waiter,omitempty"`
	LeaseID admission.LeaseID      `json:"lease_id,omitempty"`
	Owner   admission.Owner        `json:"owner,omitzero"`
	// Tokens and Cost: a reconcile's settlement.
	Tokens int64 `json:"tokens,omitempty"`
	Cost   int64 `json:"cost,omitempty"`
	// Settle: a release that reconciles the lease to Tokens and Cost
	// first.
	Settle   bool       `json:"settle,omitempty"`
	OwnerID  string     `json:"owner_id,omitempty"`
	OwnerGen uint64     `json:"owner_gen,omitempty"`
	State    *syncState `json:"state,omitempty"`

	// results
	Err     *wireError                   `json:"err,omitempty"`
	Lease   *admission.Lease             `json:"lease,omitempty"`
	Stats   *admission.ScopeStats        `json:"stats,omitempty"`
	All     []admission.ScopeStats       `json:"all,omitempty"`
	Pos     *admission.Position          `json:"pos,omitempty"`
	Expires time.Time                    `json:"expires,omitzero"`
	Synced  map[string]admission.LeaseID `json:"synced,omitempty"`

	// mirror: leases added to the mirror, and removed; Reset: the whole
	// mirror, replacing what the replica had.
	Mirror   []mirrorLease `json:"mirror,omitempty"`
	Unmirror []mirrorKey   `json:"unmirror,omitempty"`
	Reset    bool          `json:"reset,omitempty"`

	// Affinity: cache-affinity entries a replica shares (affinity.go).
	Affinity []AffinityEntry `json:"affinity,omitempty"`

	// Spent is what budget scopes had spent when the leases of a
	// release's reply, or of a mirror's removal, ended (spend.go).
	Spent []wireSpend `json:"spent,omitempty"`
}

// wireRequest is an admission.Request as it crosses the wire. Its
// Resolve func reaches the leader only from the leader's own replica (in
// process). From another replica, Resolves says it had one: the leader
// then resolves it to the candidates it arrived with, and to those its
// Spec resolves to at the leader (see the package doc, "Re-resolution
// across replicas").
type wireRequest struct {
	ID          string                                         `json:"id"`
	Priority    int32                                          `json:"priority,omitempty"`
	FairnessKey string                                         `json:"key,omitempty"`
	Deadline    time.Time                                      `json:"deadline,omitzero"`
	Owner       admission.Owner                                `json:"owner,omitzero"`
	Candidates  []admission.Candidate                          `json:"candidates"`
	Place       uint64                                         `json:"place,omitempty"`
	Hold        time.Duration                                  `json:"hold,omitempty"`
	Resolves    bool                                           `json:"resolves,omitempty"`
	Spec        []byte                                         `json:"spec,omitempty"`
	resolve     func(id string) ([]admission.Candidate, error) `json:"-"`
}

func toWire(r admission.Request) *wireRequest {
	return &wireRequest{ID: r.ID, Priority: r.Priority, FairnessKey: r.FairnessKey,
		Deadline: r.Deadline, Owner: r.Owner, Candidates: r.Candidates, Place: r.Place, Hold: r.Hold,
		Resolves: r.Resolve != nil, Spec: r.Spec, resolve: r.Resolve}
}

// request is w as an engine queues it without a resolver for its Spec.
func (w *wireRequest) request() admission.Request { return w.requestWith(nil) }

// requestWith is w as the leader queues it: a waiter of another replica
// that has a Resolve gets arrivedWith, which asks specs (the resolver
// the leader's replica registered, Engine.OnResolve; nil: none) for the
// candidates w's Spec resolves to.
func (w *wireRequest) requestWith(specs *specResolver) admission.Request {
	if w == nil {
		return admission.Request{}
	}
	resolve := w.resolve
	if resolve == nil && w.Resolves {
		resolve = arrivedWith(w.Candidates, w.Spec, specs)
	}
	return admission.Request{ID: w.ID, Priority: w.Priority, FairnessKey: w.FairnessKey,
		Deadline: w.Deadline, Owner: w.Owner, Candidates: w.Candidates, Place: w.Place, Hold: w.Hold,
		Resolve: resolve, Spec: w.Spec}
}

// specResolver holds the resolver a replica registered for the Specs of
// other replicas' waiters (Engine.OnResolve), read while it leads.
type specResolver = atomic.Pointer[SpecResolver]

// arrivedWith is the leader's Resolve for a waiter of another replica
// that has one: the candidates the waiter arrived with, every one of
// them, of which the engine keeps those on usable scopes, then those
// its spec resolves to here that it did not arrive with (a node that
// connected since), after them. So a fence drops a node's candidates and
// its activation gives them back, in the order and at the indexes the
// replica knows them by (a lease's Candidate indexes the replica's list,
// which it never resolves again while another replica leads), and a
// lease on an added candidate carries its needs, by which the replica
// knows it (Engine.onNotify).
func arrivedWith(cands []admission.Candidate, spec []byte, specs *specResolver) func(string) ([]admission.Candidate, error) {
	cands = slices.Clone(cands)
	// The spec as the resolver registered now read it (the engine calls
	// Resolve under its lock: one at a time).
	var readBy *SpecResolver
	var now func() []admission.Candidate
	return func(string) ([]admission.Candidate, error) {
		out := slices.Clone(cands)
		var f *SpecResolver
		if specs != nil && len(spec) > 0 {
			f = specs.Load()
		}
		if f == nil {
			return out, nil
		}
		if f != readBy {
			var err error
			if now, err = (*f)(spec); err != nil {
				// Its spec cannot be read here (a newer replica's, say): it
				// keeps what it arrived with.
				now = nil
			}
			readBy = f
		}
		if now == nil {
			return out, nil
		}
		for _, c := range now() {
			if len(out) >= admission.MaxCandidates {
				break
			}
			if !slices.ContainsFunc(out, func(o admission.Candidate) bool { return slices.Equal(o.Needs, c.Needs) }) {
				out = append(out, c)
			}
		}
		return out, nil
	}
}

// syncState is everything a replica holds, sent to a leader when its
// session begins: the scopes it has configured, its leases, and its
// queued waiters in the order they arrived.
type syncState struct {
	Scopes  map[string]admission.ScopeConfig `json:"scopes,omitempty"`
	Removed []string                         `json:"removed,omitempty"`
	// Fenced and Active are the newest generation of each owner that the
	// replica fenced, and activated.
	Fenced  map[string]uint64 `json:"fenced,omitempty"`
	Active  map[string]uint64 `json:"active,omitempty"`
	Leases  []heldLease       `json:"leases,omitempty"`
	Waiters []*wireRequest    `json:"waiters,omitempty"`
	// Mirror is the last mirror the replica got from a leader: leases
	// of other replicas the new leader must hold until they sync.
	Mirror []mirrorLease `json:"mirror,omitempty"`
}

// heldLease is a lease a replica holds, as it re-asserts it: Local is the
// replica's own id for it, Remote the id the leader that granted it gave
// .
type heldLease struct {
	Local  admission.LeaseID `json:"local"`
	Remote admission.LeaseID `json:"remote,omitempty"`
	// Epoch is the term whose leader granted Remote.
	Epoch uint64       `json:"epoch,omitempty"`
	Req   *wireRequest `json:"req"`
	Cand  int          `json:"cand"`
	// Bound is how long the lease has until its bound (Request.Hold
	// from when the replica got it, and a margin); zero: no bound.
	Bound time.Duration `json:"bound,omitempty"`
}

// wireError carries an engine error across: its kind, for errors.Is, the
// typed error's fields, and the message.
type wireError struct {
	Kind    string                         `json:"kind"`
	Message string                         `json:"message"`
	Full    *admission.QueueFullError      `json:"queue_full,omitempty"`
	Timeout *admission.TimeoutError        `json:"timeout,omitempty"`
	Tokens  *admission.TokenLimitError     `json:"token_limit,omitempty"`
	Rate    *admission.RateLimitedError    `json:"rate_limited,omitempty"`
	Budget  *admission.BudgetExceededError `json:"budget_exceeded,omitempty"`
}

// sentinels names the engine's errors on the wire.
var sentinels = []struct {
	kind string
	err  error
}{
	{"invalid", admission.ErrInvalid},
	{"unknown_scope", admission.ErrUnknownScope},
	{"duplicate", admission.ErrDuplicate},
	{"queue_full", admission.ErrQueueFull},
	{"timeout", admission.ErrTimeout},
	{"cancelled", admission.ErrCancelled},
	{"no_candidate", admission.ErrNoCandidate},
	{"rate_limited", admission.ErrRateLimited},
	{"budget_exceeded", admission.ErrBudgetExceeded},
	{"would_wait", admission.ErrWouldWait},
	{"stale_owner", admission.ErrStaleOwner},
	{"fenced", admission.ErrFenced},
	{"lease_not_held", admission.ErrLeaseNotHeld},
	{"not_queued", admission.ErrNotQueued},
	{"closed", admission.ErrClosed},
	{"unavailable", ErrUnavailable},
	{"wrong_term", errWrongTerm},
	{"protocol", ErrProtocol},
	// A leader's call on behalf of its own replica runs under that
	// caller's context, which may end while it waits (for the term's
	// replicas to sync): the caller must see its own cancellation.
	{"context_canceled", context.Canceled},
	{"context_deadline", context.DeadlineExceeded},
}

func encodeErr(err error) *wireError {
	if err == nil {
		return nil
	}
	w := &wireError{Kind: "other", Message: err.Error()}
	var (
		full *admission.QueueFullError
		to   *admission.TimeoutError
		tl   *admission.TokenLimitError
		rl   *admission.RateLimitedError
		be   *admission.BudgetExceededError
	)
	switch {
	case errors.As(err, &full):
		w.Full = full
	case errors.As(err, &to):
		w.Timeout = to
	case errors.As(err, &tl):
		w.Tokens = tl
	case errors.As(err, &rl):
		w.Rate = rl
	case errors.As(err, &be):
		w.Budget = be
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			w.Kind = s.kind
			break
		}
	}
	return w
}

// remoteError is an engine error the leader reported: its message, and
// the sentinel errors.Is finds.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

func (w *wireError) err() error {
	if w == nil {
		return nil
	}
	switch {
	case w.Full != nil:
		return w.Full
	case w.Timeout != nil:
		return w.Timeout
	case w.Tokens != nil:
		return w.Tokens
	case w.Rate != nil:
		return w.Rate
	case w.Budget != nil:
		return w.Budget
	}
	for _, s := range sentinels {
		if s.kind == w.Kind {
			if w.Message == s.err.Error() {
				return s.err
			}
			return &remoteError{msg: w.Message, sentinel: s.err}
		}
	}
	return errors.New(w.Message)
}

// reader decodes frames, refusing any longer than its limit: maxHello
// until the session is authenticated, maxFrame after.
type reader struct {
	br    *bufio.Reader
	limit int
}

func newReader(r io.Reader) *reader {
	return &reader{br: bufio.NewReaderSize(r, 64<<10), limit: maxHello}
}

// authenticated lifts the bound to maxFrame: the peer showed the secret,
// or, on the side that dialed, the leader welcomed the session.
func (r *reader) authenticated() { r.limit = maxFrame }

func (r *reader) next() (*frame, error) {
	var line []byte
	for {
		chunk, err := r.br.ReadSlice('\n')
		if len(line)+len(chunk) > r.limit {
			return nil, fmt.Errorf("a frame longer than %d bytes", r.limit)
		}
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return nil, err
		}
		break
	}
	f := new(frame)
	if err := json.Unmarshal(line, f); err != nil {
		return nil, fmt.Errorf("a malformed frame: %w", err)
	}
	return f, nil
}

// settlement is a reconcile frame's settlement.
func (f *frame) settlement() admission.Settlement {
	return admission.Settlement{Tokens: f.Tokens, Cost: f.Cost}
}

// settled is w with candidate cand reserving what a settlement says was
// used, for a lease re-asserted to a new leader after Reconcile; w and its
// candidates are left as they are (the caller's request shares them).
func (w *wireRequest) settled(cand int, used admission.Settlement) *wireRequest {
	if w == nil || cand < 0 || cand >= len(w.Candidates) {
		return w
	}
	c := *w
	c.Candidates = slices.Clone(w.Candidates)
	c.Candidates[cand].Tokens, c.Candidates[cand].Cost = used.Tokens, used.Cost
	return &c
}
