package fleet

import (
	"net"
	"testing"
	"time"
)

// TestSendWritten: the channel sendWritten returns closes only once the
// frame has been written to the connection: over a synchronous pipe,
// once the other end has read it.
func TestSendWritten(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	c := newConn(a, guard)
	defer c.close()
	defer b.Close()
	written, err := c.sendWritten(&frame{Op: opMirror, Epoch: 3})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-written:
		t.Fatal("written before the other end read anything")
	case <-time.After(20 * time.Millisecond):
	}
	f, err := newReader(b).next()
	if err != nil || f.Op != opMirror || f.Epoch != 3 {
		t.Fatalf("read %+v, %v", f, err)
	}
	select {
	case <-written:
	case <-time.After(guard):
		t.Fatal("not written after the other end read it")
	}
	c.close()
	if _, err := c.sendWritten(&frame{Op: opMirror}); err == nil {
		t.Fatal("sendWritten on a closed session: no error")
	}
}
