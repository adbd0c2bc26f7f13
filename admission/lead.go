package admission

import "sync"

// LeadKind says what a LeadEvent reports.
type LeadKind uint8

const (
	// TermBegan: this replica now leads the fleet's term Epoch, whose
	// durable work Engine admits. Workers is the sum of the live
	// replicas' task workers when it began (0 if it could not be read).
	TermBegan LeadKind = iota + 1
	// TermEnded: the term this replica led ended here; its engine is
	// gone, and what it held is the next leader's to recover.
	TermEnded
	// WorkersChanged: while this replica leads, the sum of the live
	// replicas' task workers changed to Workers.
	WorkersChanged
	// ReplicaForgotten: while this replica leads, Replica's heartbeats
	// lapsed and it was fenced: what it ran may be taken over at once.
	ReplicaForgotten
)

// A LeadEvent is one change in what a replica of a fleet leads.
type LeadEvent struct {
	Kind    LeadKind
	Engine  Engine
	Epoch   uint64
	Workers int
	Replica string
}

// Leadership is the durable side of a fleet's terms as one replica sees
// them: an ordered stream of LeadEvents that any number of subscribers
// follow, from whenever they subscribe. The task service is one.
type Leadership interface {
	// Subscribe returns the events from now on, in the order they
	// happened, and a cancel that ends the subscription (the channel is
	// then closed). If a term is under way here, the first event is its
	// TermBegan, with the workers as they are now; so a subscriber that
	// comes late misses nothing it needs.
	Subscribe() (events <-chan LeadEvent, cancel func())
}

// LeadFeed is a Leadership that publishes what it is told. A slow
// subscriber never holds up the publisher or the others: each has a
// queue of its own, drained by a goroutine that its cancel joins.
type LeadFeed struct {
	mu      sync.Mutex
	current *LeadEvent // the term under way here, if any
	subs    map[*leadSub]struct{}
}

var _ Leadership = (*LeadFeed)(nil)

// Publish sends e to every subscriber, after what they were sent before.
func (f *LeadFeed) Publish(e LeadEvent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch e.Kind {
	case TermBegan:
		cur := e
		f.current = &cur
	case TermEnded:
		f.current = nil
	case WorkersChanged:
		if f.current != nil {
			f.current.Workers = e.Workers
		}
	}
	for s := range f.subs {
		s.push(e)
	}
}

// Subscribe: see Leadership.
func (f *LeadFeed) Subscribe() (<-chan LeadEvent, func()) {
	s := &leadSub{out: make(chan LeadEvent), wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	f.mu.Lock()
	if f.subs == nil {
		f.subs = make(map[*leadSub]struct{})
	}
	f.subs[s] = struct{}{}
	if f.current != nil {
		s.push(*f.current)
	}
	f.mu.Unlock()
	go s.pump()
	var once sync.Once
	return s.out, func() {
		once.Do(func() {
			f.mu.Lock()
			delete(f.subs, s)
			f.mu.Unlock()
			close(s.quit)
			<-s.done
		})
	}
}

// leadSub is one subscription: its queue, and the goroutine that hands
// the queue's events to out one at a time.
type leadSub struct {
	mu    sync.Mutex
	queue []LeadEvent
	out   chan LeadEvent
	wake  chan struct{}
	quit  chan struct{}
	done  chan struct{}
}

func (s *leadSub) push(e LeadEvent) {
	s.mu.Lock()
	s.queue = append(s.queue, e)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *leadSub) pump() {
	defer close(s.done)
	defer close(s.out)
	for {
		s.mu.Lock()
		var next *LeadEvent
		if len(s.queue) > 0 {
			e := s.queue[0]
			s.queue[0] = LeadEvent{}
			s.queue = s.queue[1:]
			next = &e
		}
		s.mu.Unlock()
		if next == nil {
			select {
			case <-s.wake:
				continue
			case <-s.quit:
				return
			}
		}
		select {
		case s.out <- *next:
		case <-s.quit:
			return
		}
	}
}
