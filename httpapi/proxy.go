package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/internal/bodyread"
)

// Request headers a client may use to ask for less than its due, or for
// another way to run; the gateway decides what they ask (gateway.Prepare).
const (
	// HeaderPriority lowers (never raises) the priority of a request.
	HeaderPriority = gateway.ParamPriority
	// HeaderMaxWait shortens (never lengthens) how long it may queue: a Go
	// duration ("2s") or seconds ("2", "0.5").
	HeaderMaxWait = gateway.ParamMaxWait
	// HeaderRunMode asks for a run mode other than production
	// ("simulation", "acceptance"), if the key's group allows it.
	HeaderRunMode = gateway.ParamRunMode
	// HeaderRunID names the acceptance run a request of that mode
	// belongs to: its scopes are the run's own.
	HeaderRunID = gateway.ParamRunID
	// HeaderPlatform pins a request to one platform's candidates, if the
	// key's group allows it.
	HeaderPlatform = gateway.ParamPlatform
	// HeaderQueueWait, on answers, says how long the request queued, in
	// milliseconds.
	HeaderQueueWait = "X-Weir-Queue-Wait-Ms"
)

// Request headers of task submissions (POST /v1/videos, POST /v1/tasks).
const (
	// HeaderCallbackURL asks for signed callback events about the task
	// at this URL, as POST /v1/tasks's callback_url does; it is how a
	// video request, whose body is OpenAI's, asks for them. The same
	// checks apply: callbacks must be enabled (tasks.webhook_secret) and
	// the URL must not name an internal address. On POST /v1/tasks a
	// body's callback_url and this header must agree if both are given.
	HeaderCallbackURL = "X-Weir-Callback-URL"
	// HeaderCallbackEvents lists, comma-separated, the events the
	// callback URL gets beyond the terminal one, as callback_events does:
	// "progress" (task.running and throttled task.progress). It needs a
	// callback URL; on POST /v1/tasks it must agree with callback_events
	// if both are given.
	HeaderCallbackEvents = "X-Weir-Callback-Events"
)

// call is one model request: the service's Call, and where its answer
// goes. One allocation holds all of it for as long as the request waits.
type call struct {
	gateway.Call
	out answerWriter
}

// model serves one OpenAI-compatible endpoint: it prepares the request,
// has the gateway serve it, and answers its error if it ended in one.
func (s *Server) model(ep endpoint) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.deps.Clock.Now()
		c, err := s.prepare(w, r, ep, nil)
		if err != nil {
			s.deps.Metrics.ObserveHTTP(ep.name, s.writeErr(w, r, err), s.deps.Clock.Now().Sub(start))
			return
		}
		s.serve(w, r, ep, c, &c.out, start)
	})
}

// ender is an answer writer with something left to write once the
// gateway is done with it (a translated stream's last event).
type ender interface {
	end(ctx context.Context)
}

// errWriter is an answer writer of a dialect with its own error shape:
// it answers an error that ended the request before an answer started,
// and returns the status written.
type errWriter interface {
	writeErr(w http.ResponseWriter, r *http.Request, err error) int
}

// serve has the gateway serve c, its answer written to ans (c.out, or a
// writer over it that translates the answer to another dialect), answers
// its error if it ended in one before an answer started, and records
// the request's usage and metrics (its access log line says how it went:
// prepare left it c).
func (s *Server) serve(w http.ResponseWriter, r *http.Request, ep endpoint, c *call, ans gateway.Answer, start time.Time) {
	c.out.clientWriter = clientWriter{w: w, rc: *http.NewResponseController(w), timeout: s.cfg.StreamWriteTimeout}
	err := s.deps.Gateway.Serve(r.Context(), &c.Call, ans)
	s.served(w, r, ep, c, ans, start, err)
}

// served ends serve: err is what the gateway's Serve returned. It is not
// serve's own code so that serve's frame, on the stack of a request
// while it waits, holds none of its locals.
//
//go:noinline
func (s *Server) served(w http.ResponseWriter, r *http.Request, ep endpoint, c *call, ans gateway.Answer, start time.Time, err error) {
	if e, ok := ans.(ender); ok {
		e.end(r.Context())
	}
	c.out.clearDeadline()
	status := c.out.status
	switch {
	case c.out.started:
	case errors.Is(err, gateway.ErrClientGone):
		status = 499 // the client is gone; nobody reads the answer
	default:
		if ew, ok := ans.(errWriter); ok {
			status = ew.writeErr(w, r, err)
		} else {
			status = s.writeErr(w, r, err)
		}
	}
	c.Usage.Latency = s.deps.Clock.Now().Sub(start)
	c.Usage.Waited = c.Waited
	c.Usage.Status = status
	c.Usage.At = start
	s.deps.Usage(c.Usage)
	s.deps.Metrics.ObserveHTTP(ep.name, status, c.Usage.Latency)
}

// prepare authenticates, reads and validates the request, and has the
// gateway decide whether its key may make it and how it runs. Nothing in
// the engine changes until it has passed. decode reads the body, if
// given (an endpoint of another dialect, which translates it to the Chat
// Completions ep serves); else decodeRequest does.
//
// Its steps are functions of their own, so that its frame, which every
// step's calls stand on, holds only the key: a goroutine whose stack grew
// past its size on the way to the queue waits on a stack twice as large.
func (s *Server) prepare(w http.ResponseWriter, r *http.Request, ep endpoint, decode func([]byte) (*request, *apiError)) (*call, error) {
	ri := infoOf(w)
	ri.access.endpoint = ep.name
	key, err := s.authenticate(w, r)
	if err != nil {
		return nil, err
	}
	req, err := s.readRequest(w, r, ep, decode)
	if err != nil {
		return nil, err
	}
	ri.access.model = req.model
	return s.grant(ri, r, &key, ep, req)
}

// readRequest reads and decodes the body of r, a request to ep (prepare).
//
//go:noinline
func (s *Server) readRequest(w http.ResponseWriter, r *http.Request, ep endpoint, decode func([]byte) (*request, *apiError)) (*request, error) {
	if aerr := s.limitBody(w, r); aerr != nil {
		return nil, aerr
	}
	body, err := bodyread.Read(r.Body, r.ContentLength, -1)
	if err != nil {
		return nil, s.bodyError(err, "could not read request body")
	}
	var req *request
	var aerr *apiError
	if decode != nil {
		req, aerr = decode(body)
	} else {
		req, aerr = decodeRequest(ep, body)
	}
	if aerr != nil {
		return nil, aerr
	}
	return req, nil
}

// grant has the gateway decide whether key may make req, a request to ep
// (prepare), and returns its call.
//
//go:noinline
func (s *Server) grant(ri *reqInfo, r *http.Request, key *weir.APIKey, ep endpoint, req *request) (*call, error) {
	ask, aerr := askOf(r)
	if aerr != nil {
		return nil, aerr
	}
	ask.Model, ask.Kind, ask.DefaultMaxWait = req.model, ep.kind, s.cfg.DefaultMaxWait
	g, err := s.deps.Gateway.Prepare(r.Context(), *key, ask)
	if err != nil {
		return nil, err
	}
	c := newCall(ri, key, &g, ep, req, r.Header)
	ri.access.call = &c.Call
	return c, nil
}

// newCall is the call of req, which g granted to key. Its fields are set
// one by one in the call new allocates: a composite literal of a
// gateway.Call would be built on the stack first, and that frame's room,
// which prepare's callers' goroutine grows its stack to hold, stays
// while the request waits.
func newCall(ri *reqInfo, key *weir.APIKey, g *gateway.Grant, ep endpoint, req *request, h http.Header) *call {
	c := new(call)
	c.RequestID, c.ClientRequestID, c.Grant = ri.id, ri.clientID, *g
	c.Path, c.Body, c.Stream, c.Header = ep.path, req, req.stream, h
	c.Tokens, c.MaxTokens, c.Wants, c.Affinity = req.estimate, req.maxTokens, req.wants, req.affinity
	if req.prompt != nil { // not a nil *tokens.Prompt in the interface
		c.Prompt = req.prompt
	}
	u := &c.Usage
	u.RequestID, u.KeyID, u.Group, u.Model, u.Endpoint, u.EndUser = ri.id, key.ID, g.Group, g.Model.Name, ep.name, req.endUser
	return c
}

// askHeaders are the headers askOf reads, in the order of its values.
// Their names are in canonical form (a test checks), so that askOf reads
// them from the header map as they are.
var askHeaders = [...]string{HeaderPriority, HeaderRunMode, HeaderRunID, HeaderPlatform, HeaderMaxWait}

// askOf is what a request's headers ask of the gateway (gateway.Ask),
// each header given at most once. Not inlined: its locals would make
// grant's frame, below the gateway's Prepare on the stack, larger. The
// values go through an array, not pointers to the Ask's fields, which
// would put the Ask on the heap.
//
//go:noinline
func askOf(r *http.Request) (gateway.Ask, *apiError) {
	var vs [len(askHeaders)]string
	for i, name := range askHeaders {
		v, aerr := canonicalHeader(r, name)
		if aerr != nil {
			return gateway.Ask{}, aerr
		}
		vs[i] = v
	}
	return gateway.Ask{Priority: vs[0], RunMode: vs[1], RunID: vs[2], Platform: vs[3], MaxWait: vs[4]}, nil
}

// limitBody refuses a body declared larger than MaxBodyBytes and bounds
// the reading of r.Body to it: a longer one fails with an error bodyError
// maps to payload_too_large.
func (s *Server) limitBody(w http.ResponseWriter, r *http.Request) *apiError {
	if r.ContentLength > s.cfg.MaxBodyBytes {
		return s.tooLarge()
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	return nil
}

func (s *Server) tooLarge() *apiError {
	return errorf(weir.CodePayloadTooLarge, "", fmt.Sprintf("request body is larger than %d bytes", s.cfg.MaxBodyBytes))
}

// bodyError is the answer to err from reading a body limitBody bounded:
// payload_too_large past the limit, request_timeout past the body's
// deadline, else invalid_request with msg.
func (s *Server) bodyError(err error, msg string) *apiError {
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return s.tooLarge()
	}
	if bodyTimedOut(err) {
		return errorf(weir.CodeRequestTimeout, "", fmt.Sprintf("the request body did not arrive within %s", s.cfg.BodyTimeout))
	}
	return errorf(weir.CodeInvalidRequest, "", msg)
}

// listModels answers GET /v1/models with the models the key may use.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) error {
	key, err := s.authenticate(w, r)
	if err != nil {
		return err
	}
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, name := range s.deps.Gateway.Models(key) {
		out.Data = append(out.Data, model{ID: name, Object: "model", OwnedBy: "weir"})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
	return nil
}

func (s *Server) getModel(w http.ResponseWriter, r *http.Request) error {
	key, err := s.authenticate(w, r)
	if err != nil {
		return err
	}
	name := r.PathValue("model")
	if !slices.Contains(s.deps.Gateway.Models(key), name) {
		return errorf(weir.CodeNotFound, "model", fmt.Sprintf("the model %q does not exist", name))
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": name, "object": "model", "created": 0, "owned_by": "weir"})
	return nil
}

// QueueView is what /admin/queues answers: every scope's state, the
// requests behind them counted once each, and on a fleet the fleet's
// (the scopes are then the fleet's, from any replica).
type QueueView struct {
	Scopes []ScopeView `json:"scopes"`
	// Requests counts each waiting and admitted request once, where each
	// scope's waiting counts it under every scope it needs or may be
	// admitted by. Nil from a server that does not count them.
	Requests *gateway.Requests `json:"requests,omitempty"`
	Fleet    *FleetView        `json:"fleet,omitempty"`
}

// ScopeView is one scope in QueueView.
type ScopeView = gateway.ScopeView

// ShadowView is what a scope's limits would have done in shadow.
type ShadowView = gateway.ShadowView

// FleetView is a fleet as the replica that answers sees it.
type FleetView struct {
	// Replica is the answering replica's id.
	Replica string `json:"replica"`
	// Epoch and Leader are the newest term it knows of.
	Epoch  uint64 `json:"epoch"`
	Leader string `json:"leader"`
	// Leading: this replica leads the term. Synced: it has synced with
	// the term's leader, so its admissions are decided (when false they
	// fail with store_unavailable).
	Leading bool `json:"leading"`
	Synced  bool `json:"synced"`
	// Replicas are the live replicas, by id; empty when PostgreSQL did not
	// answer (Error says why).
	Replicas []ReplicaView `json:"replicas"`
	Error    string        `json:"error,omitempty"`
	// Catalog is the fleet's catalog as this replica serves it; nil
	// when it serves its own config's (a Config built in code).
	Catalog *CatalogView `json:"catalog,omitempty"`
	// Protocol is the fleet protocol as this replica speaks it with its
	// leader (docs/upgrades.md).
	Protocol *ProtocolView `json:"protocol,omitempty"`
}

// ProtocolView is the fleet protocol as a replica speaks it.
type ProtocolView struct {
	// Version is its session's with the leader (0: none); Min and Max
	// are the versions its build speaks.
	Version int `json:"version"`
	Min     int `json:"min"`
	Max     int `json:"max"`
	// Refused, while it and its leader speak no version in common, says
	// so: both versions and what to do.
	Refused string `json:"refused,omitempty"`
}

// CatalogView is the fleet's catalog version a replica serves.
type CatalogView struct {
	Version int64  `json:"version"`
	Hash    string `json:"hash"`
	// FileHash is the replica's own config file's catalog; Drift: it is
	// not the version's.
	FileHash string `json:"file_hash"`
	Drift    bool   `json:"drift"`
}

// ReplicaView is one live replica in FleetView.
type ReplicaView struct {
	ID      string `json:"id"`
	Gen     uint64 `json:"gen"`
	Workers int    `json:"workers"`
	// HeartbeatAgeMs is how old its last heartbeat was, by PostgreSQL's
	// clock.
	HeartbeatAgeMs int64 `json:"heartbeat_age_ms"`
}

// NodesView is what /admin/nodes answers: the edge nodes seen since the
// gateway started, by name.
type NodesView struct {
	Nodes []weir.NodeView `json:"nodes"`
}

func (s *Server) nodes(w http.ResponseWriter, r *http.Request) {
	out := NodesView{Nodes: []weir.NodeView{}}
	if s.deps.Nodes != nil {
		out.Nodes = append(out.Nodes, s.deps.Nodes(r.Context())...)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// forgetNode forgets a gone node at once: its slots' scopes are retired
// and it leaves /admin/nodes. A connected node is refused: it would
// register them again at its next session.
func (s *Server) forgetNode(w http.ResponseWriter, r *http.Request) error {
	node := r.PathValue("node")
	if s.deps.ForgetNode == nil {
		return errorf(weir.CodeNotFound, "node", "this gateway has no edge listener: it has no node to forget")
	}
	f, err := s.deps.ForgetNode(r.Context(), node)
	switch {
	case errors.Is(err, weir.ErrNotFound):
		return errorf(weir.CodeNotFound, "node", fmt.Sprintf("no gone node %q: the gateway has not seen it since it started, or has forgotten it", node))
	case errors.Is(err, weir.ErrConflict):
		return errorf(weir.CodeInvalidRequest, "node", fmt.Sprintf("node %q is connected, and would register its slots again at its next session: "+
			"revoke its token (weir nodes revoke), which ends its session, then forget it", node))
	case err != nil:
		infoOf(w).log().Error("could not forget a node", "node", node, "error", err)
		return errorf(weir.CodeInternal, "", fmt.Sprintf("could not retire all of node %q's scopes; it is kept, to be forgotten again: %v", node, err))
	}
	writeJSON(w, http.StatusOK, f)
	return nil
}

func (s *Server) queues(w http.ResponseWriter, r *http.Request) {
	var out QueueView
	if s.deps.Queues != nil {
		out.Scopes = s.deps.Queues.Scopes(r.Context())
	}
	n := gateway.CountRequests(out.Scopes)
	out.Requests = &n
	if s.deps.Fleet != nil {
		out.Fleet = s.deps.Fleet(r.Context())
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}
