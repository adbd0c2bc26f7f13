package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
)

// ErrForbiddenAddress is wrapped by every error that refuses a destination
// because of where it is: a forbidden address range, a name resolving to one,
// or a host written in a form whose address is ambiguous.
var ErrForbiddenAddress = errors.New("webhook: forbidden address")

// ErrInvalidURL is wrapped by errors about a URL's shape: scheme, userinfo,
// missing host, bad port.
var ErrInvalidURL = errors.New("webhook: invalid URL")

// addrClass says which switch, if any, lets an address range through.
type addrClass uint8

const (
	classNever    addrClass = iota // no configuration allows it
	classLoopback                  // Config.AllowLoopback
	classPrivate                   // Config.AllowPrivate
)

type forbiddenRange struct {
	prefix netip.Prefix
	class  addrClass
	what   string
}

// forbiddenRanges are checked in order, so a more specific range must come
// before a wider one that contains it (::1 before ::/96). Sources: the IANA
// IPv4 and IPv6 special-purpose address registries (RFC 6890 and updates).
// Addresses in neither are taken to be public.
var forbiddenRanges = []forbiddenRange{
	// IPv4.
	{netip.MustParsePrefix("0.0.0.0/8"), classNever, `"this network" (0.0.0.0 reaches the local host)`},
	{netip.MustParsePrefix("10.0.0.0/8"), classPrivate, "private (RFC 1918)"},
	{netip.MustParsePrefix("100.64.0.0/10"), classPrivate, "shared address space (CGNAT, RFC 6598)"},
	{netip.MustParsePrefix("127.0.0.0/8"), classLoopback, "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), classNever, "link-local (cloud metadata lives here)"},
	{netip.MustParsePrefix("172.16.0.0/12"), classPrivate, "private (RFC 1918)"},
	{netip.MustParsePrefix("192.0.0.0/24"), classNever, "IETF protocol assignments"},
	{netip.MustParsePrefix("192.0.2.0/24"), classNever, "documentation (TEST-NET-1)"},
	{netip.MustParsePrefix("192.88.99.0/24"), classNever, "6to4 relay anycast (deprecated)"},
	{netip.MustParsePrefix("192.168.0.0/16"), classPrivate, "private (RFC 1918)"},
	{netip.MustParsePrefix("198.18.0.0/15"), classNever, "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), classNever, "documentation (TEST-NET-2)"},
	{netip.MustParsePrefix("203.0.113.0/24"), classNever, "documentation (TEST-NET-3)"},
	{netip.MustParsePrefix("224.0.0.0/4"), classNever, "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), classNever, "reserved (includes broadcast 255.255.255.255)"},

	// IPv6. IPv4-mapped addresses (::ffff:0:0/96) never get here: they are
	// unmapped and checked as IPv4 first. NAT64 (64:ff9b::/96) and 6to4
	// (2002::/16) are checked by the IPv4 address they embed.
	{netip.MustParsePrefix("::/128"), classNever, "unspecified"},
	{netip.MustParsePrefix("::1/128"), classLoopback, "loopback"},
	{netip.MustParsePrefix("::/96"), classNever, "IPv4-compatible (deprecated)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), classNever, "local-use NAT64 (RFC 8215)"},
	{netip.MustParsePrefix("100::/64"), classNever, "discard-only"},
	{netip.MustParsePrefix("2001::/23"), classNever, "IETF protocol assignments (Teredo, ORCHID, benchmarking)"},
	{netip.MustParsePrefix("2001:db8::/32"), classNever, "documentation"},
	{netip.MustParsePrefix("3fff::/20"), classNever, "documentation"},
	{netip.MustParsePrefix("fc00::/7"), classPrivate, "unique local (private)"},
	{netip.MustParsePrefix("fe80::/10"), classNever, "link-local"},
	{netip.MustParsePrefix("fec0::/10"), classNever, "site-local (deprecated)"},
	{netip.MustParsePrefix("ff00::/8"), classNever, "multicast"},
}

var (
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052 well-known prefix
	sixToFour   = netip.MustParsePrefix("2002::/16")    // RFC 3056
)

// policy decides which addresses a Sender may connect to. The zero policy is
// the strict one.
type policy struct {
	allowLoopback bool
	allowPrivate  bool
}

func (p policy) allows(c addrClass) bool {
	switch c {
	case classLoopback:
		return p.allowLoopback
	case classPrivate:
		return p.allowPrivate
	}
	return false
}

// checkAddr returns nil if ip may be connected to, or an error wrapping
// ErrForbiddenAddress that says which range it is in.
func (p policy) checkAddr(ip netip.Addr) error {
	if !ip.IsValid() {
		return fmt.Errorf("%w: invalid address", ErrForbiddenAddress)
	}
	if ip.Zone() != "" {
		// A zone only means something for link-local and multicast
		// addresses, both forbidden; say so plainly.
		return fmt.Errorf("%w: %s is a scoped (zoned) address", ErrForbiddenAddress, ip)
	}
	orig := ip
	ip = ip.Unmap() // ::ffff:127.0.0.1 is 127.0.0.1 on the wire
	if ip.Is6() {
		b := ip.As16()
		var v4 netip.Addr
		switch {
		case nat64Prefix.Contains(ip):
			v4 = netip.AddrFrom4([4]byte(b[12:16]))
		case sixToFour.Contains(ip):
			v4 = netip.AddrFrom4([4]byte(b[2:6]))
		}
		if v4.IsValid() {
			if err := p.checkAddr(v4); err != nil {
				return fmt.Errorf("%s embeds %s: %w", orig, v4, err)
			}
			return nil
		}
	}
	for _, r := range forbiddenRanges {
		if r.prefix.Contains(ip) {
			if p.allows(r.class) {
				return nil
			}
			if ip != orig {
				return fmt.Errorf("%w: %s (%s) is %s, %s", ErrForbiddenAddress, orig, ip, r.what, r.prefix)
			}
			return fmt.Errorf("%w: %s is %s, %s", ErrForbiddenAddress, ip, r.what, r.prefix)
		}
	}
	return nil
}

// ValidateURL checks a callback URL when it is submitted, with the strict
// policy (no loopback, no private addresses): an absolute http or https URL
// with a host, no userinfo, a valid port, and, where the host is an address
// literal, an address that may be connected to. Names are not resolved here;
// the Sender checks what they resolve to each time it connects.
//
// The error wraps ErrInvalidURL or ErrForbiddenAddress.
func ValidateURL(raw string) error {
	_, err := policy{}.parseURL(raw)
	return err
}

// parseURL parses and validates raw under p.
func (p policy) parseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidURL, redactError(err))
	}
	return u, p.validateURL(u)
}

func (p policy) validateURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%w: scheme %q: only http and https are allowed", ErrInvalidURL, u.Scheme)
	}
	if u.Opaque != "" {
		return fmt.Errorf("%w: %q is not an absolute URL with a host", ErrInvalidURL, Redact(u.String()))
	}
	if u.User != nil {
		return fmt.Errorf("%w: userinfo is not allowed", ErrInvalidURL)
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("%w: no host", ErrInvalidURL)
	}
	if port := u.Port(); port != "" {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return fmt.Errorf("%w: port %q", ErrInvalidURL, port)
		}
	}
	return p.checkHost(host)
}

// checkHost checks what can be known of a host without resolving it: an
// address literal is checked at once, a name written as a number is refused,
// and the names reserved for loopback (RFC 6761) are refused unless loopback
// is allowed. Any other name passes here and is checked when dialled.
func (p policy) checkHost(host string) error {
	if ip, err := netip.ParseAddr(host); err == nil {
		return p.checkAddr(ip)
	}
	if endsInNumber(host) {
		return fmt.Errorf("%w: host %q is written as a number but is not a dotted-quad IPv4 address; resolvers disagree on what it means", ErrForbiddenAddress, host)
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if (name == "localhost" || strings.HasSuffix(name, ".localhost")) && !p.allowLoopback {
		return fmt.Errorf("%w: %q is a loopback name", ErrForbiddenAddress, host)
	}
	return nil
}

// endsInNumber reports whether the last label of host (ignoring one trailing
// dot) is a number in any of the forms inet_aton accepts: decimal, octal with
// a leading 0, or hex with 0x. The WHATWG URL standard treats such hosts as
// IPv4 addresses ("127.1", "0x7f.1", "2130706433"); glibc's resolver does
// too; Go's resolver looks them up as names. Call it only for hosts that are
// not canonical address literals.
func endsInNumber(host string) bool {
	host = strings.TrimSuffix(host, ".")
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	if allDigits(last, 10) {
		return true
	}
	if len(last) >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') {
		return allDigits(last[2:], 16)
	}
	return false
}

func allDigits(s string, base int) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case '0' <= c && c <= '9':
		case base == 16 && ('a' <= c && c <= 'f' || 'A' <= c && c <= 'F'):
		default:
			return false
		}
	}
	return true
}

// Resolver looks up the addresses of a host. *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

var _ Resolver = (*net.Resolver)(nil)

// dialFunc connects to an address; the guarded dialer only ever passes it an
// "ip:port" it has checked.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// guardedDialer is the http.Transport's DialContext. It resolves the host
// itself, checks every address, and dials the checked literals, so the
// address checked is the address connected to.
type guardedDialer struct {
	policy   policy
	resolver Resolver
	dialIP   dialFunc
}

func (d *guardedDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w: port %q", addr, ErrInvalidURL, portStr)
	}
	if err := d.policy.checkHost(host); err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		ips, err = d.resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("dial %s: %w", addr, err)
		}
		if len(ips) == 0 {
			return nil, fmt.Errorf("dial %s: %s has no addresses", addr, host)
		}
		// Refuse the name if any of its addresses is forbidden, rather than
		// dialling the allowed ones: a name that mixes public and internal
		// answers is an attack, not a receiver.
		for _, ip := range ips {
			if err := d.policy.checkAddr(ip); err != nil {
				return nil, fmt.Errorf("dial %s: name %s: %w", addr, host, err)
			}
		}
	}
	var lastErr error
	for _, ip := range ips {
		ip = ip.Unmap()
		if (network == "tcp4" && !ip.Is4()) || (network == "tcp6" && !ip.Is6()) {
			continue
		}
		conn, err := d.dialIP(ctx, network, netip.AddrPortFrom(ip, uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	if lastErr == nil {
		lastErr = fmt.Errorf("dial %s: no %s address for %s", addr, network, host)
	}
	return nil, lastErr
}

// control is the net.Dialer's Control hook under the default dialIP: the last
// check, on the very address the socket connects to. The guarded dialer has
// already checked it; this keeps the rule true should another path to the
// socket ever appear.
func (p policy) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot parse dialled address %q", ErrForbiddenAddress, address)
	}
	return p.checkAddr(ap.Addr())
}
