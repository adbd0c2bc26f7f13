package fleet

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-gateway/weir/clock"
)

// memStore is the fleet's coordination in memory: the database a fleet
// of replicas in one process shares, for tests that need no PostgreSQL.
// Its times are its clock's; it passes the coordination's conformance
// suite (coordtest, run by TestMemStoreConformance) on the real clock,
// and a test may give it a fake one, shared with its electors, to move
// time for the store and the replicas at once.
type memStore struct {
	clock clock.Clock

	// fence orders fenced writes before campaigns, as the term row's
	// locks do on PostgreSQL: a fenced write holds it shared, a campaign
	// exclusively. waiting counts the campaigns waiting for it.
	fence   sync.RWMutex
	waiting atomic.Int64

	mu        sync.Mutex
	term      memTerm
	gen       uint64 // the last generation handed out
	replicas  map[string]*memReplica
	lives     map[uint64]int // generation → life sessions holding it
	secret    string
	offers    map[string]memOffer
	listeners map[*func(uint64)]struct{}
}

type memTerm struct {
	epoch     uint64
	leader    string
	addr      string
	leaderGen uint64
	expires   time.Time
}

type memReplica struct {
	gen       uint64
	addr      string
	workers   int
	heartbeat time.Time
}

type memOffer struct {
	addr          string
	served, nodes []byte
	updated       time.Time
}

var (
	_ Coordination = (*memStore)(nil)
	_ NodeBoard    = (*memStore)(nil)
)

func newMemStore(c clock.Clock) *memStore {
	return &memStore{clock: c, replicas: map[string]*memReplica{}, lives: map[uint64]int{},
		offers: map[string]memOffer{}, listeners: map[*func(uint64)]struct{}{}}
}

// announceLocked tells the listeners of a new epoch or an ended term.
func (s *memStore) announceLocked(epoch uint64) {
	for f := range s.listeners {
		(*f)(epoch)
	}
}

func (s *memStore) termLocked(now time.Time) Term {
	return Term{Epoch: s.term.epoch, Leader: s.term.leader, Addr: s.term.addr, Left: max(0, s.term.expires.Sub(now))}
}

// runningLocked reports whether epoch is the current term, led by leader
// and unexpired.
func (s *memStore) runningLocked(epoch uint64, leader string, now time.Time) bool {
	return s.term.epoch == epoch && s.term.leader == leader && s.term.expires.After(now)
}

func (s *memStore) ReplicaRegister(ctx context.Context, p *ReplicaRegisterParams) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if p.ID == "" {
		return 0, errors.New("memStore: empty replica id")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	s.replicas[p.ID] = &memReplica{gen: s.gen, addr: p.Addr, workers: p.Workers, heartbeat: s.clock.Now()}
	return s.gen, nil
}

func (s *memStore) ReplicaHeartbeat(ctx context.Context, id string, gen uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.replicas[id]
	if !ok || r.gen != gen {
		return ErrFenced
	}
	r.heartbeat = s.clock.Now()
	return nil
}

func (s *memStore) ReplicaLeave(ctx context.Context, id string, gen uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.replicas[id]; ok && r.gen == gen {
		delete(s.replicas, id)
	}
	return nil
}

func (s *memStore) TermCampaign(ctx context.Context, p *TermCampaignParams) (Term, bool, error) {
	if err := ctx.Err(); err != nil {
		return Term{}, false, err
	}
	s.waiting.Add(1)
	s.fence.Lock()
	s.waiting.Add(-1)
	defer s.fence.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	t := &s.term
	take := !t.expires.After(now) ||
		(t.leader == p.Replica && t.leaderGen < p.Gen) ||
		(p.TakeOver && t.epoch == p.Epoch && t.leaderGen > 0 && s.lives[t.leaderGen] == 0)
	if !take {
		return s.termLocked(now), false, nil
	}
	*t = memTerm{epoch: t.epoch + 1, leader: p.Replica, addr: p.Addr, leaderGen: p.Gen, expires: now.Add(p.TTL)}
	s.announceLocked(t.epoch)
	return Term{Epoch: t.epoch, Leader: p.Replica, Addr: p.Addr, Left: p.TTL}, true, nil
}

func (s *memStore) TermRenew(ctx context.Context, p *TermRenewParams) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if !s.runningLocked(p.Epoch, p.Leader, now) {
		return false, nil
	}
	s.term.expires = now.Add(p.TTL)
	return true, nil
}

func (s *memStore) TermResign(ctx context.Context, epoch uint64, leader string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if s.runningLocked(epoch, leader, now) {
		s.term.expires = now
		s.announceLocked(epoch)
	}
	return nil
}

func (s *memStore) TermGet(ctx context.Context) (Term, error) {
	if err := ctx.Err(); err != nil {
		return Term{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.termLocked(s.clock.Now()), nil
}

func (s *memStore) ReplicaList(ctx context.Context, p *ReplicaListParams) ([]Replica, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	var out []Replica
	for id, r := range s.replicas {
		age := now.Sub(r.heartbeat)
		if (age >= p.Timeout) != p.Lapsed {
			continue
		}
		out = append(out, Replica{ID: id, Gen: r.gen, Addr: r.addr, Workers: r.workers, HeartbeatAge: age,
			Session: s.lives[r.gen] > 0})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (s *memStore) ReplicaForget(ctx context.Context, p *ReplicaForgetParams) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	r, ok := s.replicas[p.ID]
	if !s.runningLocked(p.Epoch, p.Leader, now) || !ok || r.gen != p.Gen || now.Sub(r.heartbeat) < p.Timeout {
		return false, nil
	}
	delete(s.replicas, p.ID)
	return true, nil
}

func (s *memStore) LifeHold(ctx context.Context, id string, gen uint64) error {
	s.mu.Lock()
	s.lives[gen]++
	s.mu.Unlock()
	<-ctx.Done()
	s.mu.Lock()
	if s.lives[gen]--; s.lives[gen] == 0 {
		delete(s.lives, gen)
	}
	s.mu.Unlock()
	return nil
}

func (s *memStore) LifeGet(ctx context.Context, id string, gen uint64) (Life, error) {
	if err := ctx.Err(); err != nil {
		return Life{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var l Life
	if r, ok := s.replicas[id]; ok && r.gen == gen {
		l.Addr = r.addr
	}
	l.Held = s.lives[gen] > 0
	return l, nil
}

func (s *memStore) SecretEnsure(ctx context.Context, candidate string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.secret == "" {
		s.secret = candidate
	}
	return s.secret, nil
}

func (s *memStore) TermListen(ctx context.Context, f func(epoch uint64)) error {
	s.mu.Lock()
	s.listeners[&f] = struct{}{}
	f(0)
	s.mu.Unlock()
	<-ctx.Done()
	s.mu.Lock()
	delete(s.listeners, &f)
	s.mu.Unlock()
	return nil
}

func (s *memStore) BoardPublish(ctx context.Context, p *BoardPublishParams) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	nodes := slices.Clone([]byte(p.Nodes))
	if nodes == nil {
		nodes = []byte("[]")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offers[p.Replica] = memOffer{addr: p.Addr, served: slices.Clone([]byte(p.Served)), nodes: nodes, updated: s.clock.Now()}
	return nil
}

func (s *memStore) BoardLeave(ctx context.Context, replica string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.offers, replica)
	return nil
}

func (s *memStore) BoardRead(ctx context.Context, p *BoardReadParams) ([]BoardOffer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	var out []BoardOffer
	for replica, o := range s.offers {
		if age := now.Sub(o.updated); replica != p.Except && age < p.TTL {
			out = append(out, BoardOffer{Replica: replica, Addr: o.addr, Served: slices.Clone(o.served),
				Nodes: slices.Clone(o.nodes), Age: age})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Replica < out[j].Replica })
	return out, nil
}

// fenceWrite opens a write fenced by leader's term of epoch: while it is
// open, no campaign takes a new term. held says the term was current;
// end closes the write.
func (s *memStore) fenceWrite(leader string, epoch uint64) (held bool, end func()) {
	s.fence.RLock()
	s.mu.Lock()
	held = s.runningLocked(epoch, leader, s.clock.Now())
	s.mu.Unlock()
	if !held {
		s.fence.RUnlock()
		return false, func() {}
	}
	var once sync.Once
	return true, func() { once.Do(s.fence.RUnlock) }
}
