package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Standard Webhooks headers.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix marks a Standard Webhooks symmetric secret.
const SecretPrefix = "whsec_"

// Key sizes the specification allows for a symmetric secret.
const (
	minKeyBytes = 24
	maxKeyBytes = 64
	newKeyBytes = 32
)

// DefaultTolerance is how far a timestamp may be from the receiver's clock,
// either way, when Verify is given a tolerance of zero or less.
const DefaultTolerance = 5 * time.Minute

// Errors from NewSigner and Verify.
var (
	ErrInvalidSecret       = errors.New("webhook: invalid secret")
	ErrMissingHeader       = errors.New("webhook: missing signature header")
	ErrInvalidTimestamp    = errors.New("webhook: timestamp outside tolerance or malformed")
	ErrNoMatchingSignature = errors.New("webhook: no matching signature")
)

// NewSecret returns a new random secret, "whsec_" followed by the standard
// base64 of 32 random bytes.
func NewSecret() (string, error) {
	key := make([]byte, newKeyBytes)
	if _, err := rand.Read(key); err != nil {
		return "", fmt.Errorf("webhook: new secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(key), nil
}

// Signer signs and verifies with one or more secrets. It is safe for
// concurrent use.
type Signer struct {
	keys [][]byte
}

// NewSigner returns a Signer for the given secrets, each "whsec_<base64>"
// (the prefix may be left off, as the reference libraries allow) encoding a
// key of 24 to 64 bytes. Give more than one secret while rotating: Sign then
// signs with each, and Verify accepts a signature made with any.
func NewSigner(secrets ...string) (*Signer, error) {
	if len(secrets) == 0 {
		return nil, fmt.Errorf("%w: no secret", ErrInvalidSecret)
	}
	s := &Signer{keys: make([][]byte, 0, len(secrets))}
	for i, secret := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
		if err != nil {
			return nil, fmt.Errorf("%w: secret %d is not base64 after %q", ErrInvalidSecret, i, SecretPrefix)
		}
		if len(key) < minKeyBytes || len(key) > maxKeyBytes {
			return nil, fmt.Errorf("%w: secret %d has %d bytes, want %d to %d", ErrInvalidSecret, i, len(key), minKeyBytes, maxKeyBytes)
		}
		s.keys = append(s.keys, key)
	}
	return s, nil
}

// Sign returns the webhook-signature header value for a message: one
// "v1,<base64>" entry per secret, separated by spaces. Only the whole
// seconds of ts are signed, as the header carries. The id should contain no
// '.' (Sender.Send checks this).
func (s *Signer) Sign(id string, ts time.Time, body []byte) string {
	var b strings.Builder
	for i, key := range s.keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("v1,")
		b.WriteString(base64.StdEncoding.EncodeToString(mac(key, id, ts.Unix(), body)))
	}
	return b.String()
}

func mac(key []byte, id string, unix int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	var buf [24]byte
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write(strconv.AppendInt(buf[:0], unix, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks a received webhook: the three headers must be present, the
// timestamp within tolerance of now in either direction (a tolerance of zero
// or less means DefaultTolerance), and at least one "v1" entry of the
// signature header must match a signature made with one of the Signer's
// secrets over exactly these body bytes. Entries of other versions (such as
// "v1a") are skipped. Signatures are compared in constant time.
//
// The error wraps ErrMissingHeader, ErrInvalidTimestamp or
// ErrNoMatchingSignature.
func (s *Signer) Verify(header http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	id := header.Get(HeaderID)
	tsHeader := header.Get(HeaderTimestamp)
	// A proxy may have split the header in two; every value counts.
	sigHeader := strings.Join(header.Values(HeaderSignature), " ")
	switch {
	case id == "":
		return fmt.Errorf("%w: %s", ErrMissingHeader, HeaderID)
	case tsHeader == "":
		return fmt.Errorf("%w: %s", ErrMissingHeader, HeaderTimestamp)
	case strings.TrimSpace(sigHeader) == "":
		return fmt.Errorf("%w: %s", ErrMissingHeader, HeaderSignature)
	}
	unix, err := parseUnix(tsHeader)
	if err != nil {
		return err
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	ts := time.Unix(unix, 0)
	if d := now.Sub(ts); d > tolerance {
		return fmt.Errorf("%w: %s is %s old, tolerance %s", ErrInvalidTimestamp, tsHeader, d.Round(time.Second), tolerance)
	}
	if d := ts.Sub(now); d > tolerance {
		return fmt.Errorf("%w: %s is %s in the future, tolerance %s", ErrInvalidTimestamp, tsHeader, d.Round(time.Second), tolerance)
	}

	expected := make([][]byte, len(s.keys))
	for i, key := range s.keys {
		expected[i] = mac(key, id, unix, body)
	}
	for _, entry := range strings.Fields(sigHeader) {
		version, encoded, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(encoded)
		if err != nil {
			continue
		}
		for _, want := range expected {
			if hmac.Equal(got, want) {
				return nil
			}
		}
	}
	return ErrNoMatchingSignature
}

// parseUnix reads a timestamp header: decimal digits only, no sign.
func parseUnix(s string) (int64, error) {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%w: %q is not integer Unix seconds", ErrInvalidTimestamp, s)
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is not integer Unix seconds", ErrInvalidTimestamp, s)
	}
	return n, nil
}
