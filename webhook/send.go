package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/weir-gateway/weir/tracing"
)

// Outcome classifies one delivery attempt for the caller's retry logic. It is
// also the low-cardinality label for metrics.
type Outcome uint8

const (
	// Delivered: the receiver answered 2xx. Done.
	Delivered Outcome = iota + 1
	// Gone: the receiver answered 410 Gone. Stop for good and do not send
	// to this URL again.
	Gone
	// Retryable: any other status (3xx not followed, 4xx, 5xx), a
	// connection or TLS error, a timeout, or the caller's context ending.
	// Try again per the Schedule.
	Retryable
	// Refused: the message was never sent and never can be: the destination
	// is forbidden (ErrForbiddenAddress), the URL or a redirect's URL is
	// invalid (ErrInvalidURL), or the message is (ErrInvalidMessage). Do not
	// retry.
	Refused
)

var outcomeNames = [...]string{"unknown", "delivered", "gone", "retryable", "refused"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// Errors from Send, beside ErrForbiddenAddress and ErrInvalidURL.
var (
	ErrInvalidMessage = errors.New("webhook: invalid message")
	ErrGone           = errors.New("webhook: receiver answered 410 Gone")
	ErrStatus         = errors.New("webhook: receiver answered an unsuccessful status")
)

// Defaults for Config.
const (
	DefaultTimeout     = 15 * time.Second
	DefaultSlowTimeout = 5 * time.Second
	DefaultUserAgent   = "Weir-Webhooks/1"
	maxIDLen           = 256
	maxDrain           = 64 << 10
)

// Config configures a Sender.
type Config struct {
	// AllowLoopback lets the Sender connect to loopback addresses
	// (127.0.0.0/8, ::1) and names ("localhost"). For tests and
	// single-machine demos only. Default false.
	AllowLoopback bool
	// AllowPrivate lets the Sender connect to private addresses: RFC 1918,
	// CGNAT 100.64.0.0/10 and unique-local fc00::/7, for deployments whose
	// receivers live on an internal network. Link-local (and so the cloud
	// metadata address) stays forbidden whatever is set. Default false.
	AllowPrivate bool
	// Timeout bounds one attempt: connecting, sending, redirects, and
	// reading the response headers. Default DefaultTimeout (15s, within
	// the 15–30s the Standard Webhooks guidance recommends).
	Timeout time.Duration
	// SlowTimeout bounds an attempt to a receiver whose last attempt ran
	// out of Timeout, but one such attempt at a time (the probe), which
	// gets Timeout: a receiver that hangs holds a worker for SlowTimeout,
	// not Timeout, and one that is only slow is still reached. Any answer
	// from the receiver ends this. Receivers are remembered per
	// Message.Tenant and host. Default DefaultSlowTimeout (5s), at most
	// Timeout.
	SlowTimeout time.Duration
	// UserAgent is sent with every request. Default DefaultUserAgent.
	UserAgent string
	// MaxRedirects is how many 307/308 redirects one attempt follows, each
	// validated and dialled through the same checks as the first request.
	// Other 3xx codes are never followed: Go would resend them as a GET
	// without the body. Default 0: no redirect is followed, and a 3xx is a
	// Retryable failure.
	MaxRedirects int
	// Resolver looks up host names. Default net.DefaultResolver.
	Resolver Resolver
	// Now tells the time for webhook-timestamp and Retry-After dates.
	// Default time.Now.
	Now func() time.Time
}

// Message is one event to deliver.
type Message struct {
	// URL is the receiver's absolute http or https URL.
	URL string
	// ID is the webhook-id: the event's id, the same on every retry, so the
	// receiver can drop duplicates. 1 to 256 printable ASCII characters
	// with no '.' and no space.
	ID string
	// Body is the JSON payload, sent and signed byte for byte.
	Body []byte
	// Signer signs the message with the receiver's secret(s).
	Signer *Signer
	// Tenant is whom the message is sent for (the task's API key): slow
	// receivers (Config.SlowTimeout) are remembered per tenant and host.
	// Default "": one tenant.
	Tenant string
}

// Attempt is what one Send did.
type Attempt struct {
	Outcome Outcome
	// StatusCode is the receiver's answer, 0 if there was none.
	StatusCode int
	// RetryAfter is the receiver's Retry-After (seconds or an HTTP date)
	// on an unsuccessful answer, 0 if absent or past. Wait at least this
	// long before the next attempt.
	RetryAfter time.Duration
	// Timestamp is the webhook-timestamp the request carried; zero when
	// Send refused the message before building a request.
	Timestamp time.Time
	// Timeout is the bound the attempt ran under: Config.Timeout, or
	// Config.SlowTimeout for a receiver that has been slow.
	Timeout time.Duration
	// TimedOut: the receiver did not answer within Timeout.
	TimedOut bool
}

// Sender delivers messages over HTTP with the SSRF checks described in the
// package documentation. It is safe for concurrent use.
type Sender struct {
	policy      policy
	timeout     time.Duration
	slowTimeout time.Duration
	slow        slowReceivers
	userAgent   string
	now         func() time.Time
	dialer      *guardedDialer
	transport   *http.Transport
	client      *http.Client
}

// NewSender returns a Sender configured by cfg.
func NewSender(cfg Config) *Sender {
	s := &Sender{
		policy:      policy{allowLoopback: cfg.AllowLoopback, allowPrivate: cfg.AllowPrivate},
		timeout:     cfg.Timeout,
		slowTimeout: cfg.SlowTimeout,
		userAgent:   cfg.UserAgent,
		now:         cfg.Now,
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	if s.slowTimeout <= 0 {
		s.slowTimeout = DefaultSlowTimeout
	}
	s.slowTimeout = min(s.slowTimeout, s.timeout)
	if s.userAgent == "" {
		s.userAgent = DefaultUserAgent
	}
	if s.now == nil {
		s.now = time.Now
	}
	resolver := cfg.Resolver
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	netDialer := &net.Dialer{KeepAlive: 30 * time.Second, Control: s.policy.control}
	s.dialer = &guardedDialer{policy: s.policy, resolver: resolver, dialIP: netDialer.DialContext}
	s.transport = &http.Transport{
		// No Proxy: a proxy would make the dialled address the proxy's,
		// and the checks meaningless.
		Proxy:                  nil,
		DialContext:            s.dialer.DialContext,
		TLSHandshakeTimeout:    10 * time.Second,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        90 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	maxRedirects := max(cfg.MaxRedirects, 0)
	s.client = &http.Client{
		Transport: s.transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			code := req.Response.StatusCode
			if len(via) > maxRedirects || (code != http.StatusTemporaryRedirect && code != http.StatusPermanentRedirect) {
				return http.ErrUseLastResponse
			}
			if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
				return http.ErrUseLastResponse // no downgrade to plain http
			}
			if err := s.policy.validateURL(req.URL); err != nil {
				return fmt.Errorf("redirect to %s: %w", Redact(req.URL.String()), err)
			}
			return nil
		},
	}
	return s
}

// ValidateURL is the package's ValidateURL under this Sender's policy: with
// AllowLoopback, say, a loopback literal passes.
func (s *Sender) ValidateURL(raw string) error {
	_, err := s.policy.parseURL(raw)
	return err
}

// CloseIdleConnections closes connections kept alive from earlier sends.
func (s *Sender) CloseIdleConnections() { s.transport.CloseIdleConnections() }

// Send makes one delivery attempt of msg: a POST of msg.Body with
// Content-Type application/json, the User-Agent, and the three Standard
// Webhooks headers, the timestamp being now. The error is nil exactly when
// the Outcome is Delivered; otherwise it says what happened and wraps
// ErrForbiddenAddress, ErrInvalidURL, ErrInvalidMessage, ErrGone or
// ErrStatus where one applies (or the transport's error). An attempt to a
// receiver that has been slow runs under Config.SlowTimeout.
func (s *Sender) Send(ctx context.Context, msg Message) (Attempt, error) {
	refuse := func(err error) (Attempt, error) {
		return Attempt{Outcome: Refused}, fmt.Errorf("webhook %s: %w", msg.ID, err)
	}
	if err := validID(msg.ID); err != nil {
		return refuse(err)
	}
	if msg.Signer == nil {
		return refuse(fmt.Errorf("%w: no signer", ErrInvalidMessage))
	}
	if !json.Valid(msg.Body) {
		return refuse(fmt.Errorf("%w: body is not JSON", ErrInvalidMessage))
	}
	u, err := s.policy.parseURL(msg.URL)
	if err != nil {
		return refuse(err)
	}

	rcv := receiverOf(msg.Tenant, u.Host)
	timeout, probe := s.slow.begin(rcv, s.timeout, s.slowTimeout)
	timedOut := fmt.Errorf("webhook: attempt timed out after %s: %w", timeout, context.DeadlineExceeded)
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, timedOut)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, msg.URL, bytes.NewReader(msg.Body))
	if err != nil {
		s.slow.end(rcv, probe, false, false) // no longer the probe
		return refuse(fmt.Errorf("%w: %v", ErrInvalidURL, redactError(err)))
	}
	ts := s.now()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", s.userAgent)
	req.Header.Set(HeaderID, msg.ID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(HeaderSignature, msg.Signer.Sign(msg.ID, ts, msg.Body))
	// The receiver joins the delivery's trace, if it is traced.
	tracing.Inject(ctx, req.Header)

	a := Attempt{Timestamp: time.Unix(ts.Unix(), 0), Timeout: timeout}
	resp, err := s.client.Do(req)
	if err != nil {
		a.TimedOut = context.Cause(ctx) == timedOut
		s.slow.end(rcv, probe, false, a.TimedOut)
		a.Outcome = Retryable
		if errors.Is(err, ErrForbiddenAddress) || errors.Is(err, ErrInvalidURL) {
			a.Outcome = Refused
		}
		if a.TimedOut && !errors.Is(err, timedOut) {
			err = fmt.Errorf("%w: %w", timedOut, err)
		}
		return a, fmt.Errorf("webhook %s: %w", msg.ID, redactError(err))
	}
	s.slow.end(rcv, probe, true, false)
	// Read a little of the body so the connection can be reused, no more.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	resp.Body.Close()

	a.StatusCode = resp.StatusCode
	switch code := resp.StatusCode; {
	case code >= 200 && code <= 299:
		a.Outcome = Delivered
		return a, nil
	case code == http.StatusGone:
		a.Outcome = Gone
		return a, fmt.Errorf("webhook %s: %w", msg.ID, ErrGone)
	default:
		a.Outcome = Retryable
		a.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), s.now())
		if code >= 300 && code <= 399 {
			return a, fmt.Errorf("webhook %s: %w: %d, redirect to %q not followed", msg.ID, ErrStatus, code, Redact(resp.Header.Get("Location")))
		}
		return a, fmt.Errorf("webhook %s: %w: %d", msg.ID, ErrStatus, code)
	}
}

// validID checks a webhook-id: the signed content is "<id>.<ts>.<body>", so
// an id with a '.' could be confused with another id and timestamp.
func validID(id string) error {
	if id == "" || len(id) > maxIDLen {
		return fmt.Errorf("%w: id must have 1 to %d characters", ErrInvalidMessage, maxIDLen)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' || c == '.' {
			return fmt.Errorf("%w: id %q: only printable ASCII without '.' or space", ErrInvalidMessage, id)
		}
	}
	return nil
}

// parseRetryAfter reads Retry-After as delay-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		const maxSecs = int64(1<<63-1) / int64(time.Second)
		return time.Duration(min(secs, maxSecs)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
