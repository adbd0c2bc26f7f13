package webhook_test

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir/webhook"
)

// The test vector of the Standard Webhooks reference libraries.
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorUnix      = 1614265330
	vectorBody      = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func mustSigner(t *testing.T, secrets ...string) *webhook.Signer {
	t.Helper()
	s, err := webhook.NewSigner(secrets...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustSecret(t *testing.T) string {
	t.Helper()
	s, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func signedHeader(s *webhook.Signer, id string, ts time.Time, body []byte) http.Header {
	h := http.Header{}
	h.Set(webhook.HeaderID, id)
	h.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(webhook.HeaderSignature, s.Sign(id, ts, body))
	return h
}

func TestSignMatchesReferenceVector(t *testing.T) {
	t.Parallel()
	for _, secret := range []string{vectorSecret, strings.TrimPrefix(vectorSecret, webhook.SecretPrefix)} {
		got := mustSigner(t, secret).Sign(vectorID, time.Unix(vectorUnix, 0), []byte(vectorBody))
		if got != vectorSignature {
			t.Errorf("Sign with %q = %q, want %q", secret, got, vectorSignature)
		}
	}
	// Sub-second parts of the time are not signed: the header has seconds.
	got := mustSigner(t, vectorSecret).Sign(vectorID, time.Unix(vectorUnix, 999_999_999), []byte(vectorBody))
	if got != vectorSignature {
		t.Errorf("Sign with nanoseconds = %q, want %q", got, vectorSignature)
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	signer := mustSigner(t, vectorSecret)
	body := []byte(vectorBody)
	ts := time.Unix(vectorUnix, 0)
	valid := func() http.Header { return signedHeader(signer, vectorID, ts, body) }
	other := mustSigner(t, mustSecret(t))
	otherSig := other.Sign(vectorID, ts, body)

	tests := []struct {
		name      string
		header    func() http.Header
		body      []byte
		now       time.Time
		tolerance time.Duration
		want      error
	}{
		{name: "valid", header: valid, now: ts},
		{name: "valid at the old edge", header: valid, now: ts.Add(5 * time.Minute)},
		{name: "valid at the future edge", header: valid, now: ts.Add(-5 * time.Minute)},
		{name: "stale", header: valid, now: ts.Add(5*time.Minute + time.Second), want: webhook.ErrInvalidTimestamp},
		{name: "future", header: valid, now: ts.Add(-5*time.Minute - time.Second), want: webhook.ErrInvalidTimestamp},
		{name: "custom tolerance", header: valid, now: ts.Add(time.Hour), tolerance: 2 * time.Hour},
		{name: "custom tolerance exceeded", header: valid, now: ts.Add(31 * time.Second), tolerance: 30 * time.Second, want: webhook.ErrInvalidTimestamp},
		{name: "tampered body", header: valid, body: []byte(`{"test": 2432232315}`), now: ts, want: webhook.ErrNoMatchingSignature},
		{name: "other id", header: func() http.Header {
			h := valid()
			h.Set(webhook.HeaderID, "msg_other")
			return h
		}, now: ts, want: webhook.ErrNoMatchingSignature},
		{name: "other timestamp", header: func() http.Header {
			h := valid()
			h.Set(webhook.HeaderTimestamp, strconv.Itoa(vectorUnix+1))
			return h
		}, now: ts, want: webhook.ErrNoMatchingSignature},
		{name: "wrong secret", header: func() http.Header {
			h := valid()
			h.Set(webhook.HeaderSignature, otherSig)
			return h
		}, now: ts, want: webhook.ErrNoMatchingSignature},
		{name: "one of several signatures", header: func() http.Header {
			h := valid()
			h.Set(webhook.HeaderSignature, strings.Join([]string{
				"v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=",
				"v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg==",
				"garbage", "v1,not-base64!",
				vectorSignature,
			}, " "))
			return h
		}, now: ts},
		{name: "signature split over two header lines", header: func() http.Header {
			h := valid()
			h.Set(webhook.HeaderSignature, otherSig)
			h.Add(webhook.HeaderSignature, vectorSignature)
			return h
		}, now: ts},
		{name: "right MAC under another version", header: func() http.Header {
			h := valid()
			h.Set(webhook.HeaderSignature, "v2"+strings.TrimPrefix(vectorSignature, "v1"))
			return h
		}, now: ts, want: webhook.ErrNoMatchingSignature},
		{name: "missing id", header: func() http.Header {
			h := valid()
			h.Del(webhook.HeaderID)
			return h
		}, now: ts, want: webhook.ErrMissingHeader},
		{name: "missing timestamp", header: func() http.Header {
			h := valid()
			h.Del(webhook.HeaderTimestamp)
			return h
		}, now: ts, want: webhook.ErrMissingHeader},
		{name: "missing signature", header: func() http.Header {
			h := valid()
			h.Del(webhook.HeaderSignature)
			return h
		}, now: ts, want: webhook.ErrMissingHeader},
		{name: "malformed timestamp", header: func() http.Header {
			h := valid()
			h.Set(webhook.HeaderTimestamp, "+"+strconv.Itoa(vectorUnix))
			return h
		}, now: ts, want: webhook.ErrInvalidTimestamp},
		{name: "timestamp in milliseconds", header: func() http.Header {
			h := valid()
			h.Set(webhook.HeaderTimestamp, strconv.Itoa(vectorUnix*1000))
			return h
		}, now: ts, want: webhook.ErrInvalidTimestamp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := body
			if tt.body != nil {
				b = tt.body
			}
			err := signer.Verify(tt.header(), b, tt.now, tt.tolerance)
			if tt.want == nil && err != nil {
				t.Fatalf("Verify = %v, want nil", err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestRotation(t *testing.T) {
	t.Parallel()
	oldSecret, newSecret := mustSecret(t), mustSecret(t)
	sender := mustSigner(t, newSecret, oldSecret)
	ts := time.Unix(1_700_000_000, 0)
	body := []byte(`{"type":"task.succeeded"}`)
	h := signedHeader(sender, "evt_1", ts, body)
	if n := len(strings.Fields(h.Get(webhook.HeaderSignature))); n != 2 {
		t.Fatalf("signature header has %d entries, want 2", n)
	}
	for name, receiver := range map[string]*webhook.Signer{
		"old": mustSigner(t, oldSecret),
		"new": mustSigner(t, newSecret),
	} {
		if err := receiver.Verify(h, body, ts, 0); err != nil {
			t.Errorf("receiver with the %s secret: %v", name, err)
		}
	}
	if err := mustSigner(t, mustSecret(t)).Verify(h, body, ts, 0); !errors.Is(err, webhook.ErrNoMatchingSignature) {
		t.Errorf("receiver with an unrelated secret: %v, want ErrNoMatchingSignature", err)
	}
}

func TestNewSecret(t *testing.T) {
	t.Parallel()
	a, b := mustSecret(t), mustSecret(t)
	if a == b {
		t.Fatal("two secrets are equal")
	}
	if !strings.HasPrefix(a, "whsec_") {
		t.Fatalf("secret %q lacks whsec_", a)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(a, "whsec_"))
	if err != nil || len(key) != 32 {
		t.Fatalf("secret key: %d bytes, %v; want 32", len(key), err)
	}
	mustSigner(t, a)
}

func TestNewSignerRejects(t *testing.T) {
	t.Parallel()
	b64 := func(n int) string { return "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, n)) }
	for name, secrets := range map[string][]string{
		"none":        nil,
		"empty":       {""},
		"not base64":  {"whsec_not base64!"},
		"too short":   {b64(23)},
		"too long":    {b64(65)},
		"one bad one": {b64(32), "whsec_%%%"},
	} {
		if _, err := webhook.NewSigner(secrets...); !errors.Is(err, webhook.ErrInvalidSecret) {
			t.Errorf("%s: NewSigner = %v, want ErrInvalidSecret", name, err)
		}
	}
	for _, n := range []int{24, 64} {
		if _, err := webhook.NewSigner(b64(n)); err != nil {
			t.Errorf("%d-byte key: %v", n, err)
		}
	}
}
