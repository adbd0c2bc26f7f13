package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weir-gateway/weir/webhook"
)

// publicIP stands in for a receiver on the internet. Tests resolve fake
// public names to it and map dials of it to a local listener, so the
// address the checks see is public while the bytes stay on this machine.
const publicIP = "93.184.216.34"

// fakeResolver answers from a table; a name with several answers gives them
// in turn, repeating the last, as a rebinding DNS server would.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	calls   map[string]int
}

func newFakeResolver(answers map[string][]string) *fakeResolver {
	r := &fakeResolver{answers: map[string][][]netip.Addr{}, calls: map[string]int{}}
	for name, list := range answers {
		for _, answer := range strings.Split(strings.Join(list, " "), "|") {
			var addrs []netip.Addr
			for _, a := range strings.Fields(answer) {
				addrs = append(addrs, netip.MustParseAddr(a))
			}
			r.answers[name] = append(r.answers[name], addrs)
		}
	}
	return r
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	answers, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host (test resolver)", Name: host, IsNotFound: true}
	}
	n := r.calls[host]
	r.calls[host]++
	return answers[min(n, len(answers)-1)], nil
}

// countingServer is a loopback listener that no refused request may reach.
func countingServer(t *testing.T, network string) (port string, hits *atomic.Int32) {
	t.Helper()
	hits = new(atomic.Int32)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	if network == "tcp6" {
		ln, err := net.Listen("tcp6", "[::1]:0")
		if err != nil {
			t.Logf("no IPv6 loopback (%v); [::1] cases use the IPv4 port", err)
			return "", hits
		}
		srv.Listener.Close()
		srv.Listener = ln
	}
	srv.Start()
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u.Port(), hits
}

func TestValidateURLShape(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"", "example.com/hook", "//example.com/hook", "ftp://example.com/", "file:///etc/passwd",
		"javascript:alert(1)", "http:example.com", "http:///hook", "http://user:pw@example.com/",
		"http://user@example.com/", "http://example.com:0/", "http://example.com:99999/",
		"http://example.com:http/", "http://exa mple.com/", "gopher://127.0.0.1:6379/_FLUSHALL",
	} {
		if err := webhook.ValidateURL(raw); !errors.Is(err, webhook.ErrInvalidURL) {
			t.Errorf("ValidateURL(%q) = %v, want ErrInvalidURL", raw, err)
		}
	}
	for _, raw := range []string{
		"https://hooks.example.com/weir?token=abc", "http://93.184.216.34/", "HTTPS://Example.COM:8443/x",
		"https://[2606:4700::1111]/", "http://[::ffff:8.8.8.8]/", "http://[64:ff9b::808:808]/",
		"http://[2002:808:808::1]/", "http://1.2.3.4.nip.io/", "http://10.0.0.1.example.com/", "http://0x7f.example/",
	} {
		if err := webhook.ValidateURL(raw); err != nil {
			t.Errorf("ValidateURL(%q) = %v, want nil", raw, err)
		}
	}
}

func TestPolicySwitches(t *testing.T) {
	t.Parallel()
	strict := webhook.NewSender(webhook.Config{})
	loopback := webhook.NewSender(webhook.Config{AllowLoopback: true})
	private := webhook.NewSender(webhook.Config{AllowPrivate: true})
	tests := []struct {
		url                   string
		loopbackOK, privateOK bool
	}{
		{"http://127.0.0.1/", true, false},
		{"http://127.9.9.9/", true, false},
		{"http://[::1]/", true, false},
		{"http://[::ffff:127.0.0.1]/", true, false},
		{"http://localhost/", true, false},
		{"http://app.localhost./", true, false},
		{"http://10.0.0.1/", false, true},
		{"http://172.31.255.255/", false, true},
		{"http://192.168.0.1/", false, true},
		{"http://100.64.0.1/", false, true},
		{"http://[fd00::1]/", false, true},
		{"http://169.254.169.254/", false, false},
		{"http://[fe80::1]/", false, false},
		{"http://0.0.0.0/", false, false},
		{"http://[::]/", false, false},
		{"http://2130706433/", false, false},
	}
	for _, tt := range tests {
		if err := strict.ValidateURL(tt.url); !errors.Is(err, webhook.ErrForbiddenAddress) {
			t.Errorf("strict: %s: %v, want ErrForbiddenAddress", tt.url, err)
		}
		for name, c := range map[string]struct {
			s  *webhook.Sender
			ok bool
		}{"AllowLoopback": {loopback, tt.loopbackOK}, "AllowPrivate": {private, tt.privateOK}} {
			err := c.s.ValidateURL(tt.url)
			if c.ok && err != nil {
				t.Errorf("%s: %s: %v, want nil", name, tt.url, err)
			}
			if !c.ok && !errors.Is(err, webhook.ErrForbiddenAddress) {
				t.Errorf("%s: %s: %v, want ErrForbiddenAddress", name, tt.url, err)
			}
		}
	}
}

func TestControlChecksTheSocketAddress(t *testing.T) {
	t.Parallel()
	strict := webhook.NewSender(webhook.Config{})
	for _, addr := range []string{"127.0.0.1:80", "[::1]:80", "[::ffff:10.1.2.3]:443", "169.254.169.254:80", "0.0.0.0:80", "not an address"} {
		if err := webhook.Control(strict, "tcp", addr); !errors.Is(err, webhook.ErrForbiddenAddress) {
			t.Errorf("Control(%s) = %v, want ErrForbiddenAddress", addr, err)
		}
	}
	if err := webhook.Control(strict, "tcp4", publicIP+":443"); err != nil {
		t.Errorf("Control(public) = %v", err)
	}
	if err := webhook.Control(webhook.NewSender(webhook.Config{AllowLoopback: true}), "tcp4", "127.0.0.1:80"); err != nil {
		t.Errorf("Control(127.0.0.1) with AllowLoopback = %v", err)
	}
}

// TestSSRFCorpus sends to each address a callback URL might use to reach the
// gateway's own network. Loopback listeners run on the ports the corpus
// names, with the real dialer, so anything that slipped through would be
// counted; each case must be refused with ErrForbiddenAddress — at
// submission where the URL alone tells, and at the dialler in any case.
func TestSSRFCorpus(t *testing.T) {
	t.Parallel()
	p, hits4 := countingServer(t, "tcp4")
	p6, hits6 := countingServer(t, "tcp6")
	if p6 == "" {
		p6 = p
	}
	// What the system resolver (/etc/hosts) says localhost is; Go answers
	// with the IPv4-mapped form ::ffff:127.0.0.1.
	localhost, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip", "localhost")
	if err != nil || len(localhost) == 0 {
		t.Fatalf("resolve localhost from /etc/hosts: %v %v", localhost, err)
	}
	var localhostAddrs []string
	for _, a := range localhost {
		localhostAddrs = append(localhostAddrs, a.String())
	}
	resolver := newFakeResolver(map[string][]string{
		"loopback.test":          {"127.0.0.1"},
		"loopback6.test":         {"::1"},
		"mapped.test":            {"::ffff:127.0.0.1"},
		"mixed.test":             {publicIP, "127.0.0.1"},
		"metadata.test":          {"169.254.169.254"},
		"private.test":           {"10.0.0.5"},
		"nat64.test":             {"64:ff9b::7f00:1"},
		"alias.test":             localhostAddrs,
		"169.254.169.254.nip.io": {"169.254.169.254"},
	})
	sender := webhook.NewSender(webhook.Config{Resolver: resolver})
	signer := mustSigner(t, mustSecret(t))

	tests := []struct {
		url      string
		atSubmit bool // refused by ValidateURL alone
	}{
		// Address literals.
		{"http://127.0.0.1:" + p + "/", true},
		{"http://127.0.0.2:" + p + "/", true},
		{"http://[::1]:" + p6 + "/", true},
		{"http://10.0.0.1/", true},
		{"http://172.16.5.4/", true},
		{"http://192.168.1.1/", true},
		{"http://169.254.169.254/latest/meta-data", true},
		{"http://[fd00:ec2::254]/latest/meta-data", true},
		{"http://[::ffff:127.0.0.1]:" + p + "/", true},
		{"http://[::ffff:7f00:1]:" + p + "/", true},
		{"http://[::ffff:169.254.169.254]/", true},
		{"http://[64:ff9b::7f00:1]:" + p + "/", true},
		{"http://[64:ff9b::a9fe:a9fe]/", true},
		{"http://[64:ff9b:1::a00:1]/", true},
		{"http://[::127.0.0.1]:" + p + "/", true},
		{"http://[2002:7f00:1::1]:" + p + "/", true},
		{"http://[2002:a9fe:a9fe::1]/", true},
		{"http://0.0.0.0:" + p + "/", true},
		{"http://[::]:" + p6 + "/", true},
		{"http://100.64.0.1/", true},
		{"http://224.0.0.1/", true},
		{"http://255.255.255.255/", true},
		{"http://[fe80::1%25lo]:" + p6 + "/", true},
		{"http://[fc00::1]/", true},
		{"http://[ff02::1]/", true},
		{"http://192.0.2.1/", true},
		{"http://198.18.0.1/", true},
		{"http://[2001:db8::1]/", true},
		// Numbers that some resolvers read as 127.0.0.1.
		{"http://2130706433:" + p + "/", true},
		{"http://0x7f000001:" + p + "/", true},
		{"http://0x7f.1:" + p + "/", true},
		{"http://0x7F.0.0.1:" + p + "/", true},
		{"http://127.1:" + p + "/", true},
		{"http://0177.0.0.1:" + p + "/", true},
		{"http://017700000001:" + p + "/", true},
		{"http://127.0.0.1.:" + p + "/", true},
		{"http://3232235777/", true}, // 192.168.1.1
		// Names for loopback.
		{"http://localhost:" + p + "/", true},
		{"http://LOCALHOST:" + p + "/", true},
		{"http://localhost.:" + p + "/", true},
		{"http://app.localhost:" + p + "/", true},
		// Names that resolve to forbidden addresses: only the dialler can tell.
		{"http://loopback.test:" + p + "/", false},
		{"http://loopback6.test:" + p6 + "/", false},
		{"http://mapped.test:" + p + "/", false},
		{"http://mixed.test:" + p + "/", false},
		{"http://metadata.test/latest/meta-data", false},
		{"http://private.test/", false},
		{"http://nat64.test:" + p + "/", false},
		{"http://alias.test:" + p + "/", false},
		{"https://169.254.169.254.nip.io/", false},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			err := webhook.ValidateURL(tt.url)
			if tt.atSubmit && !errors.Is(err, webhook.ErrForbiddenAddress) {
				t.Errorf("ValidateURL = %v, want ErrForbiddenAddress", err)
			}
			if !tt.atSubmit && err != nil {
				t.Errorf("ValidateURL = %v, want nil (a name is checked when dialled)", err)
			}

			a, err := sender.Send(context.Background(), webhook.Message{URL: tt.url, ID: "evt_ssrf", Body: []byte(`{}`), Signer: signer})
			if a.Outcome != webhook.Refused || !errors.Is(err, webhook.ErrForbiddenAddress) {
				t.Errorf("Send = %v, %v; want refused, ErrForbiddenAddress", a.Outcome, err)
			}

			// The dialler refuses on its own, without the URL checks before it.
			u, _ := url.Parse(tt.url)
			port := u.Port()
			if port == "" {
				port = "80"
			}
			conn, err := webhook.DialContext(context.Background(), sender, "tcp", net.JoinHostPort(u.Hostname(), port))
			if conn != nil {
				conn.Close()
			}
			if !errors.Is(err, webhook.ErrForbiddenAddress) {
				t.Errorf("dial = %v, want ErrForbiddenAddress", err)
			}
		})
	}
	t.Cleanup(func() {
		if n := hits4.Load() + hits6.Load(); n != 0 {
			t.Errorf("%d requests reached a loopback listener", n)
		}
	})
}

// redirectRig is a receiver reachable only as the public name
// hooks.example.com (resolved to publicIP, dials of which are mapped to it),
// which answers /hook with a redirect to ?to=, and an internal server on
// loopback that the redirect points at.
type redirectRig struct {
	sender        *webhook.Sender
	signer        *webhook.Signer
	internalPort  string
	internalHits  atomic.Int32
	hookHits      atomic.Int32
	finalVerified atomic.Int32
	mu            sync.Mutex
	dialled       []string
}

func newRedirectRig(t *testing.T, maxRedirects int, resolverAnswers map[string][]string) *redirectRig {
	t.Helper()
	rig := &redirectRig{signer: mustSigner(t, mustSecret(t))}
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rig.internalHits.Add(1)
	}))
	t.Cleanup(internal.Close)
	u, _ := url.Parse(internal.URL)
	rig.internalPort = u.Port()

	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hook":
			rig.hookHits.Add(1)
			code := http.StatusTemporaryRedirect
			if c := r.URL.Query().Get("code"); c != "" {
				fmt.Sscan(c, &code)
			}
			w.Header().Set("Location", r.URL.Query().Get("to"))
			w.WriteHeader(code)
		case "/final":
			body, _ := io.ReadAll(r.Body)
			if rig.signer.Verify(r.Header, body, fixedNow(), 0) == nil && string(body) == `{"ok":true}` {
				rig.finalVerified.Add(1)
			}
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(receiver.Close)
	receiverAddr := receiver.Listener.Addr().String()

	answers := map[string][]string{"hooks.example.com": {publicIP}}
	for k, v := range resolverAnswers {
		answers[k] = v
	}
	rig.sender = webhook.NewSender(webhook.Config{
		MaxRedirects: maxRedirects,
		Resolver:     newFakeResolver(answers),
		Now:          fixedNow,
	})
	webhook.SetDialIP(rig.sender, func(ctx context.Context, network, addr string) (net.Conn, error) {
		rig.mu.Lock()
		rig.dialled = append(rig.dialled, addr)
		rig.mu.Unlock()
		if addr != publicIP+":80" {
			return nil, fmt.Errorf("test: unexpected dial to %s", addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", receiverAddr)
	})
	return rig
}

func (rig *redirectRig) send(t *testing.T, location string, code int) (webhook.Attempt, error) {
	t.Helper()
	q := url.Values{"to": {location}, "code": {fmt.Sprint(code)}}
	return rig.sender.Send(context.Background(), webhook.Message{
		URL: "http://hooks.example.com/hook?" + q.Encode(), ID: "evt_redirect", Body: []byte(`{"ok":true}`), Signer: rig.signer,
	})
}

func (rig *redirectRig) dials() []string {
	rig.mu.Lock()
	defer rig.mu.Unlock()
	return append([]string(nil), rig.dialled...)
}

func TestRedirectToInternalHostIsRefused(t *testing.T) {
	t.Parallel()
	rig := newRedirectRig(t, 3, map[string][]string{"internal.example.com": {"127.0.0.1"}})

	// Positive control: a redirect that stays on the public receiver is
	// followed, body and signature intact, so the refusals below are the
	// checks' doing and not a broken redirect.
	a, err := rig.send(t, "http://hooks.example.com/final", http.StatusTemporaryRedirect)
	if a.Outcome != webhook.Delivered || err != nil {
		t.Fatalf("redirect to the public receiver: %v, %v; want delivered", a.Outcome, err)
	}
	if rig.finalVerified.Load() != 1 {
		t.Fatal("the redirected request did not verify at the receiver")
	}

	for _, target := range []string{
		"http://127.0.0.1:" + rig.internalPort + "/internal",
		"http://[::ffff:127.0.0.1]:" + rig.internalPort + "/internal",
		"http://localhost:" + rig.internalPort + "/internal",
		"http://2130706433:" + rig.internalPort + "/internal",
		"http://169.254.169.254/latest/meta-data",
		// A name that passes every URL check and resolves to loopback
		// only when dialled: this one is refused by the dialer itself.
		"http://internal.example.com:" + rig.internalPort + "/internal",
	} {
		for _, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
			before := rig.hookHits.Load()
			a, err := rig.send(t, target, code)
			if a.Outcome != webhook.Refused || !errors.Is(err, webhook.ErrForbiddenAddress) {
				t.Errorf("%d to %s: %v, %v; want refused, ErrForbiddenAddress", code, target, a.Outcome, err)
			}
			if rig.hookHits.Load() != before+1 {
				t.Errorf("%d to %s: the first hop did not reach the receiver", code, target)
			}
		}
	}
	if n := rig.internalHits.Load(); n != 0 {
		t.Fatalf("%d requests reached the internal host", n)
	}
	for _, addr := range rig.dials() {
		if addr != publicIP+":80" {
			t.Fatalf("dialled %s; only the checked public address may be dialled", addr)
		}
	}
}

func TestRedirectsNotFollowedByDefault(t *testing.T) {
	t.Parallel()
	rig := newRedirectRig(t, 0, nil)
	for _, code := range []int{301, 302, 303, 307, 308} {
		a, err := rig.send(t, "http://hooks.example.com/final", code)
		if a.Outcome != webhook.Retryable || a.StatusCode != code || !errors.Is(err, webhook.ErrStatus) {
			t.Errorf("%d: %+v, %v; want retryable %d, ErrStatus", code, a, err, code)
		}
	}
	if rig.finalVerified.Load() != 0 {
		t.Fatal("a redirect was followed")
	}
	// With redirects allowed, codes that would turn the POST into a GET are
	// still not followed.
	rig = newRedirectRig(t, 3, nil)
	for _, code := range []int{301, 302, 303} {
		if a, _ := rig.send(t, "http://hooks.example.com/final", code); a.Outcome != webhook.Retryable || a.StatusCode != code {
			t.Errorf("%d with MaxRedirects: %+v, want retryable %d", code, a, code)
		}
	}
	if rig.finalVerified.Load() != 0 {
		t.Fatal("a 301/302/303 was followed")
	}
}

// TestRebindingIsCaughtAtDial: the name resolves to a public address for the
// first connection and to loopback for the next; the second is refused,
// because every new connection resolves and checks again and connects to
// the address it checked.
func TestRebindingIsCaughtAtDial(t *testing.T) {
	t.Parallel()
	rig := newRedirectRig(t, 0, map[string][]string{"rebind.example.com": {publicIP + "|127.0.0.1"}})
	msg := webhook.Message{URL: "http://rebind.example.com/final", ID: "evt_rebind", Body: []byte(`{"ok":true}`), Signer: rig.signer}
	if a, err := rig.sender.Send(context.Background(), msg); a.Outcome != webhook.Delivered {
		t.Fatalf("first send: %v, %v; want delivered", a.Outcome, err)
	}
	rig.sender.CloseIdleConnections() // force a new connection, and so a new lookup
	a, err := rig.sender.Send(context.Background(), msg)
	if a.Outcome != webhook.Refused || !errors.Is(err, webhook.ErrForbiddenAddress) {
		t.Fatalf("after rebinding: %v, %v; want refused, ErrForbiddenAddress", a.Outcome, err)
	}
	if got := rig.dials(); len(got) != 1 || got[0] != publicIP+":80" {
		t.Fatalf("dialled %v, want only %s:80", got, publicIP)
	}
}
