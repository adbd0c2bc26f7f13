package edge

import (
	"context"
	"slices"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-gateway/weir/edge/edgepb"
)

// maxReadyRuns bounds the Run streams a node keeps open ahead: enough for
// every slot of a large node, few enough that a node cannot make the
// gateway hold more than a bounded number of idle streams.
const maxReadyRuns = 256

// readyRuns is how many Run streams a node registered with reg may keep
// open ahead: one for each of its slots, up to maxReadyRuns.
func readyRuns(reg *edgepb.Register) int {
	n := 0
	for _, p := range reg.Providers {
		n += int(p.Slots)
	}
	return min(n, maxReadyRuns)
}

// readyStream is a Run stream the node opened ahead (RunOpen.ready). It
// carries the runs offered on it one after another: while it waits it is
// among its session's ready streams; a Do takes it for a run; the run's
// end puts it back, or, for a run cut short, ends it.
type readyStream struct {
	stream edgepb.Edge_RunServer
	// cur is the run on it, nil while it waits; guarded by the session's
	// mu.
	cur *run

	end     chan struct{} // closed to end the stream, with status
	endOnce sync.Once
	status  error
}

// stop ends rs's stream with st (nil: OK), once.
func (rs *readyStream) stop(st error) {
	rs.endOnce.Do(func() {
		rs.status = st
		close(rs.end)
	})
}

// enter counts rs among s's ready streams and parks it; false once s has
// ended or has as many as it allows.
func (s *session) enter(rs *readyStream) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended() {
		return false
	}
	if s.readyAll >= s.readyMax {
		return false
	}
	s.readyAll++
	s.ready = append(s.ready, rs)
	return true
}

// leave forgets rs, whose stream ends.
func (s *session) leave(rs *readyStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readyAll--
	if i := slices.Index(s.ready, rs); i >= 0 {
		s.ready = slices.Delete(s.ready, i, i+1)
	}
}

// takeReadyLocked offers r on the newest waiting ready stream of s, if
// there is one: r.ready and its stream are set, the stream no longer
// waits. s.mu is held.
func (s *session) takeReadyLocked(r *run) {
	n := len(s.ready)
	if n == 0 {
		return
	}
	rs := s.ready[n-1]
	s.ready[n-1] = nil
	s.ready = s.ready[:n-1]
	rs.cur, r.ready, r.stream = r, rs, rs.stream
	close(r.attached)
}

// repark puts rs, whose run ended, back to wait for the next; false if
// the stream is ending or s has ended.
func (s *session) repark(rs *readyStream) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs.cur = nil
	select {
	case <-s.done:
		return false
	case <-rs.end:
		return false
	default:
	}
	s.ready = append(s.ready, rs)
	return true
}

// current is the run on rs, or nil.
func (s *session) current(rs *readyStream) *run {
	s.mu.Lock()
	defer s.mu.Unlock()
	return rs.cur
}

// ready serves a Run stream opened ahead: it carries the runs offered on
// it until one is cut short, the session ends or the node ends it.
func (h *Hub) ready(ctx context.Context, s *session, open *edgepb.RunOpen, stream edgepb.Edge_RunServer) error {
	if open.RunId != "" {
		return status.Error(codes.InvalidArgument, "a ready Run stream names no run")
	}
	rs := &readyStream{stream: stream, end: make(chan struct{})}
	if !s.enter(rs) {
		return status.Errorf(codes.ResourceExhausted, "the session keeps at most %d ready Run streams (Welcome.ready_runs)", s.readyMax)
	}
	defer func() {
		rs.stop(nil) // a run that ends now does not put it back
		s.leave(rs)
	}()
	select {
	case <-rs.end:
		return rs.status
	case <-s.done:
		if r := s.current(rs); r != nil {
			r.cut(endedDuring(r.target))
		}
		return status.Error(codes.Unavailable, "the node's session ended")
	case <-ctx.Done():
		// The node ended the stream: a run on it sees that itself.
		return nil
	}
}
