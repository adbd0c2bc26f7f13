package fleet

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

// errSessionClosed ends whatever waited on a session that closed.
var errSessionClosed = errors.New("fleet session closed")

// conn is one session's connection, either side: frames are written by
// one goroutine from a queue, so no caller blocks on the network; the
// reader's loop is the owner's. A side that has written nothing for a
// third of the timeout sends a ping, and a side that has read nothing for
// the timeout closes the connection. The owner ends a session with stop,
// which joins the writer.
type conn struct {
	nc      net.Conn
	timeout time.Duration
	r       *reader
	writer  group
	// proto is the session's protocol version, set by its handshake
	// before the session is used.
	proto int

	mu      sync.Mutex
	queue   []*frame
	wake    chan struct{}
	closed  bool
	err     error // what closed the connection, if it failed
	closing bool  // close once the queue is written
	done    chan struct{}
	nextID  uint64
	waiting map[uint64]chan *frame
	// written are closed once the frames queued with them are written
	// (sendWritten).
	written []chan struct{}
}

// newConn is the session on nc of a replica that dialed: its reader
// takes frames of at most maxHello until the leader's welcome
// authenticates the session (reader.authenticated).
func newConn(nc net.Conn, timeout time.Duration) *conn {
	return newConnReader(nc, timeout, newReader(nc))
}

// newConnReader is the session on nc, read with r, which may hold what
// was read of nc already.
func newConnReader(nc net.Conn, timeout time.Duration, r *reader) *conn {
	c := &conn{nc: nc, timeout: timeout, r: r, wake: make(chan struct{}, 1),
		done: make(chan struct{}), waiting: make(map[uint64]chan *frame)}
	c.writer.spawn(c.writeLoop)
	return c
}

// send queues f; it reports errSessionClosed once the session is over.
func (c *conn) send(f *frame) error { return c.enqueue(f, false, nil) }

// sendWritten queues f and returns a channel closed once f has been
// written to the connection (handed to the kernel, which delivers it
// even if this process is paused next); the session's end (done) ends
// the wait too.
func (c *conn) sendWritten(f *frame) (<-chan struct{}, error) {
	ch := make(chan struct{})
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errSessionClosed
	}
	c.queue = append(c.queue, f)
	c.written = append(c.written, ch)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return ch, nil
}

// call sends f with a fresh ID and waits for the frame that answers it
// (a reply, or an ack), or for the session to end.
func (c *conn) call(f *frame) (*frame, error) {
	ch := make(chan *frame, 1)
	if err := c.enqueue(f, true, ch); err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		return r, nil
	case <-c.done:
		return nil, errSessionClosed
	}
}

// post sends f with a fresh ID and does not wait: its reply, when it
// comes, finds no call and is dropped. Frames go out in the order they
// are sent or posted.
func (c *conn) post(f *frame) error { return c.enqueue(f, true, nil) }

// enqueue queues f for the writer, with a fresh ID if numbered, and, if
// reply is set, the call waiting on it; errSessionClosed once the
// session is over.
func (c *conn) enqueue(f *frame, numbered bool, reply chan *frame) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errSessionClosed
	}
	if numbered {
		c.nextID++
		f.ID = c.nextID
	}
	if reply != nil {
		c.waiting[f.ID] = reply
	}
	c.queue = append(c.queue, f)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil
}

// answer hands f to the call waiting for it; it reports whether one was.
func (c *conn) answer(f *frame) bool {
	c.mu.Lock()
	ch, ok := c.waiting[f.ID]
	delete(c.waiting, f.ID)
	c.mu.Unlock()
	if ok {
		ch <- f
	}
	return ok
}

// read returns the next frame, or an error once the connection is lost,
// malformed, or silent for the timeout.
func (c *conn) read() (*frame, error) {
	for {
		_ = c.nc.SetReadDeadline(time.Now().Add(c.timeout))
		f, err := c.r.next()
		if err != nil {
			return nil, err
		}
		if f.Op == opPing {
			continue
		}
		return f, nil
	}
}

// finish closes the connection once what is queued has been written.
func (c *conn) finish() {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// fail closes the connection for err, which it keeps (closedByPeer).
func (c *conn) fail(err error) {
	c.mu.Lock()
	if !c.closed && c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	c.close()
}

// closedByPeer reports whether the connection ended because the other
// side closed it (end of file, a reset), not through a timeout or a
// close of this side's.
func (c *conn) closedByPeer() bool {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// refused reports whether a dial failed because nothing listens there:
// the peer's host answered that the port is closed.
func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// stop closes the connection and waits for its writer to return: what
// the owner of a session does once it is done with it.
func (c *conn) stop() {
	c.close()
	c.writer.wait()
}

func (c *conn) close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.mu.Unlock()
	close(c.done)
	_ = c.nc.Close()
}

func (c *conn) writeLoop() {
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	enc := json.NewEncoder(bw)
	// Real time, as the connection's deadlines are.
	ping := time.NewTimer(c.timeout / 3)
	defer ping.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-c.wake:
		case <-ping.C:
			c.mu.Lock()
			if len(c.queue) == 0 {
				c.queue = append(c.queue, &frame{Op: opPing})
			}
			c.mu.Unlock()
		}
		c.mu.Lock()
		batch, written := c.queue, c.written
		c.queue, c.written = nil, nil
		closing := c.closing
		c.mu.Unlock()
		if len(batch) == 0 {
			if closing {
				c.close()
				return
			}
			continue
		}
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.timeout))
		for _, f := range batch {
			if err := enc.Encode(f); err != nil {
				c.fail(err)
				return
			}
		}
		if err := bw.Flush(); err != nil {
			c.fail(err)
			return
		}
		for _, ch := range written {
			close(ch)
		}
		if closing {
			c.close()
			return
		}
		ping.Reset(c.timeout / 3)
	}
}
