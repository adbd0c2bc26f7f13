package bench

import (
	"fmt"
	"net"
)

// DefaultPorts is where Overhead's listeners start (OverheadConfig.Ports):
// below Linux's ephemeral range (32768–60999), from which the load
// generator's own connections take their local ports, so that a target
// never listens on a port a connection may want.
const DefaultPorts = 20000

// portTries is how many ports past a taken one portPlan tries before it
// leaves the choice to the kernel.
const portTries = 100

// portPlan hands out loopback ports for the rig's listeners: consecutive
// ports from next, skipping those taken; next 0 leaves each choice to the
// kernel (an ephemeral port).
type portPlan struct{ next int }

// listen listens on the plan's next free loopback port or, if none of
// portTries is free, on one the kernel chooses.
func (p *portPlan) listen() (net.Listener, error) {
	for i := 0; p.next > 0 && i < portTries && p.next < 1<<16; i++ {
		port := p.next
		p.next++
		if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			return ln, nil
		}
	}
	return net.Listen("tcp", "127.0.0.1:0")
}

// addr is the plan's next free loopback address, for a listener another
// process (or the gateway) opens: found free by listening on it and
// closing it at once, so another program may take it between the two.
func (p *portPlan) addr() string {
	if p.next == 0 {
		return "127.0.0.1:0"
	}
	ln, err := p.listen()
	if err != nil {
		return "127.0.0.1:0"
	}
	defer ln.Close()
	return ln.Addr().String()
}
