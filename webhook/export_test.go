package webhook

import (
	"context"
	"net"
)

// SetDialIP replaces the dial of checked "ip:port" addresses, so that a test
// can map a fake public address to a local receiver. Every address it is
// given has already passed the checks. Call it before the first Send.
func SetDialIP(s *Sender, dial func(ctx context.Context, network, addr string) (net.Conn, error)) {
	s.dialer.dialIP = dial
}

// Control runs the socket-level check of the default dialer.
func Control(s *Sender, network, address string) error {
	return s.policy.control(network, address, nil)
}

// DialContext dials through the Sender's guarded dialer directly, skipping
// the URL checks that run before it.
func DialContext(ctx context.Context, s *Sender, network, addr string) (net.Conn, error) {
	return s.dialer.DialContext(ctx, network, addr)
}
