// Package webhook delivers signed events to URLs that clients supply, safely.
//
// It has four parts, each usable on its own; the task system drives them and
// keeps the durable state (attempt counts, next-attempt times) itself.
//
// # Signing
//
// Signatures follow the Standard Webhooks scheme (standardwebhooks.com):
// every request carries
//
//	webhook-id:        the event's id, the same on every retry (an idempotency key)
//	webhook-timestamp: the attempt's time, integer Unix seconds
//	webhook-signature: space-separated "v1,<base64 HMAC-SHA256>" entries
//
// where the MAC is taken over "<id>.<timestamp>.<body>" with the key that a
// secret "whsec_<base64>" encodes. A [Signer] holds one or more secrets: it
// signs with all of them (so a secret can be rotated without downtime) and
// [Signer.Verify] accepts a request that carries any signature made with any
// of them, comparing in constant time and refusing timestamps outside a
// tolerance in either direction.
//
// # Sending
//
// A [Sender] POSTs one [Message] and reports an [Outcome] for the caller's
// retry logic: [Delivered] (2xx), [Gone] (410: stop for good), [Retryable]
// (any other status, a connection error, a timeout) or [Refused] (the
// destination is forbidden or the message invalid: never retry). [Schedule]
// says how long to wait before each retry; [DefaultSchedule] is
//
//	attempt  1: at once
//	attempt  2: +5s   (±10%)
//	attempt  3: +30s
//	attempt  4: +2m
//	attempt  5: +10m
//	attempt  6: +30m
//	attempt  7: +1h
//	attempt  8: +2h
//	attempt  9: +4h
//	attempt 10: +8h
//	attempt 11: +12h
//	attempt 12: +24h  (about 51h43m after the first), then give up
//
// # Slow receivers
//
// One attempt is bounded by Config.Timeout (15s). A receiver whose last
// attempt ran out of it is remembered as slow, per tenant (Message.Tenant)
// and host: its next attempts run under Config.SlowTimeout (5s), except
// one at a time, the probe, which still gets the full Timeout, so that a
// receiver that is slow but works is still reached. Any answer from it
// forgets it. A hanging receiver so holds a sending worker for 5s rather
// than 15s, and since the memory is per tenant, a tenant whose path on a
// shared host hangs does not shorten another tenant's attempts there.
//
// A [Limiter] bounds how many deliveries each tenant has in flight at
// once, and how many beyond each tenant's first all tenants have
// together. The caller takes a slot before it sends and, when it is
// refused, puts the delivery off rather than wait on a worker: a tenant
// whose receivers hang holds at most its bound of the workers, its other
// deliveries wait for its own, and some workers are always left for
// tenants with nothing in flight.
//
// # SSRF
//
// Callback URLs come from clients, so the Sender refuses to connect to the
// gateway's own network. The check runs where the connection is made: the
// Sender's dialer resolves the host itself, checks every address the name
// resolves to, refuses the whole name if any of them is forbidden, and then
// connects to the checked address literal, never to the name again. A
// redirect, a second request, or a DNS answer that changes between requests
// (rebinding) all go through the same dialer, so none of them can reach an
// address the first check would have refused. Proxies from the environment
// are ignored for the same reason. The forbidden ranges are listed in
// ssrf.go; in short: loopback, RFC 1918 and unique-local, link-local
// (including the cloud metadata address 169.254.169.254), CGNAT, unspecified,
// multicast, broadcast and reserved space, documentation and benchmarking
// ranges, IPv4-mapped and IPv4-compatible IPv6 forms of any of these, and
// NAT64 and 6to4 addresses that embed one. Host names written as
// non-canonical IPv4 numbers ("2130706433", "0x7f.1", "127.1", "0177.0.0.1")
// are refused outright: resolvers disagree on whether they are numbers (glibc
// reads each of those as 127.0.0.1, Go's own resolver as a name), and no
// legitimate receiver needs them.
//
// [ValidateURL] checks a URL when it is submitted (scheme, host, no userinfo,
// a literal address at once); it does not resolve names, because the answer
// at submission proves nothing about the answer at delivery.
//
// Redirects are not followed by default, as the Standard Webhooks guidance
// and the major webhook senders advise: a 3xx is a retryable failure and the
// client should fix its URL. Config.MaxRedirects allows following 307 and 308
// (the codes that keep the method and body); every hop is validated and
// dialled through the same checks.
package webhook
