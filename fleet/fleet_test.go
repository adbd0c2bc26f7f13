package fleet

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/admission/admissiontest"
)

// replicas starts n replicas' engines on loopback listeners, the first
// leading epoch 1, the others following it, and waits until every one
// has synced with the leader.
func replicas(t *testing.T, n int, opts admission.Options) []*Engine {
	t.Helper()
	return replicasWith(t, n, opts, nil)
}

// replicasWith is replicas with edit applied to each replica's Config.
func replicasWith(t *testing.T, n int, opts admission.Options, edit func(*Config)) []*Engine {
	t.Helper()
	var es []*Engine
	var addrs []string
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cfg := Config{Replica: string(rune('a' + i)), Gen: 1, Secret: "s", Options: opts, SessionTimeout: 5 * time.Second}
		if edit != nil {
			edit(&cfg)
		}
		e := New(cfg)
		go e.Serve(ln)
		t.Cleanup(func() { ln.Close() })
		t.Cleanup(e.Close)
		es = append(es, e)
		addrs = append(addrs, ln.Addr().String())
	}
	term := Term{Epoch: 1, Leader: "a", Addr: addrs[0]}
	var live []string
	for i := range n {
		live = append(live, string(rune('a'+i)))
	}
	for i, e := range es {
		e.SetTerm(term, i == 0, live)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, e := range es {
		if err := e.Ready(ctx); err != nil {
			t.Fatalf("replica not synced: %v", err)
		}
	}
	return es
}

// spread is an admission.Engine made of several replicas: each call goes
// to the next replica in turn, and a lease's calls go to the replica that
// holds it, as in a fleet whose load balancer spreads requests.
type spread struct {
	es      []*Engine
	n       atomic.Uint64
	mu      sync.Mutex
	holders map[admission.LeaseID]*Engine
	waiters map[string]*Engine
}

func (s *spread) next() *Engine { return s.es[s.n.Add(1)%uint64(len(s.es))] }

func (s *spread) held(e *Engine, l admission.Lease, err error) (admission.Lease, error) {
	if err == nil {
		s.mu.Lock()
		s.holders[l.ID] = e
		s.mu.Unlock()
	}
	return l, err
}

func (s *spread) holder(id admission.LeaseID) *Engine {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.holders[id]; e != nil {
		return e
	}
	return s.es[0]
}

func (s *spread) SetScope(ctx context.Context, name string, cfg admission.ScopeConfig) error {
	return s.next().SetScope(ctx, name, cfg)
}
func (s *spread) RemoveScope(ctx context.Context, name string) error {
	return s.next().RemoveScope(ctx, name)
}
func (s *spread) Scope(ctx context.Context, name string) (admission.ScopeStats, error) {
	return s.next().Scope(ctx, name)
}
func (s *spread) Scopes(ctx context.Context) []admission.ScopeStats { return s.next().Scopes(ctx) }
func (s *spread) Acquire(ctx context.Context, req admission.Request) (admission.Lease, error) {
	e := s.next()
	l, err := e.Acquire(ctx, req)
	return s.held(e, l, err)
}
func (s *spread) TryAcquire(ctx context.Context, req admission.Request) (admission.Lease, error) {
	e := s.next()
	l, err := e.TryAcquire(ctx, req)
	return s.held(e, l, err)
}
func (s *spread) Enqueue(ctx context.Context, req admission.Request, notify func(admission.Lease, error)) error {
	e := s.next()
	if req.Resolve != nil {
		// A func reaches the leader only from its own replica.
		e = s.es[0]
	}
	s.mu.Lock()
	prev := s.waiters[req.ID]
	s.waiters[req.ID] = e
	s.mu.Unlock()
	err := e.Enqueue(ctx, req, func(l admission.Lease, err error) {
		s.held(e, l, err)
		notify(l, err)
	})
	if err != nil {
		// A refused request leaves the routing as it was: a refused
		// duplicate must not send the queued waiter's Cancel elsewhere.
		s.mu.Lock()
		if s.waiters[req.ID] == e {
			s.waiters[req.ID] = prev
		}
		s.mu.Unlock()
	}
	return err
}
func (s *spread) Cancel(ctx context.Context, id string) error {
	s.mu.Lock()
	e := s.waiters[id]
	s.mu.Unlock()
	if e == nil {
		e = s.next()
	}
	return e.Cancel(ctx, id)
}
func (s *spread) Position(ctx context.Context, id string) (admission.Position, error) {
	return s.next().Position(ctx, id)
}
func (s *spread) Renew(ctx context.Context, id admission.LeaseID, owner admission.Owner) (time.Time, error) {
	return s.holder(id).Renew(ctx, id, owner)
}
func (s *spread) Release(ctx context.Context, id admission.LeaseID, owner admission.Owner) error {
	return s.holder(id).Release(ctx, id, owner)
}
func (s *spread) Reconcile(ctx context.Context, id admission.LeaseID, owner admission.Owner, used admission.Settlement) error {
	return s.holder(id).Reconcile(ctx, id, owner, used)
}
func (s *spread) Restore(ctx context.Context, req admission.Request, cand int) (admission.Lease, error) {
	e := s.next()
	l, err := e.Restore(ctx, req, cand)
	return s.held(e, l, err)
}
func (s *spread) Fence(ctx context.Context, id string, gen uint64) error {
	return s.next().Fence(ctx, id, gen)
}
func (s *spread) Activate(ctx context.Context, id string, gen uint64) error {
	return s.next().Activate(ctx, id, gen)
}

// TestConformance runs the engine's conformance suite against a fleet of
// two replicas: each call goes to the other replica than the last, so a
// waiter queued through one is admitted by a release through the other.
func TestConformance(t *testing.T) {
	t.Parallel()
	admissiontest.Exercise(t, func(t *testing.T, opts admission.Options) admission.Engine {
		return &spread{es: replicas(t, 2, opts), holders: make(map[admission.LeaseID]*Engine), waiters: make(map[string]*Engine)}
	})
}
