package webhook_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weir-gateway/weir/webhook"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"https://hooks.example.com/in?token=s3cret", "https://hooks.example.com/…"},
		{"https://user:s3cret@hooks.example.com:8443/a/b?x=1#frag", "https://hooks.example.com:8443/…"},
		{"https://hooks.example.com", "https://hooks.example.com"},
		{"https://hooks.example.com/in#s3cret", "https://hooks.example.com/…"},
		{"http://[::1]:80/in?s3cret", "http://[::1]:80/…"},
		{"https://hooks.example.com/a%2Fb?s3cret", "https://hooks.example.com/…"},
		// Slack's and Discord's incoming webhooks carry the secret in the path.
		{"https://hooks.slack.com/services/T0/B0/s3cret", "https://hooks.slack.com/…"},
		{"https://discord.com/api/webhooks/1/s3cret", "https://discord.com/…"},
		{"https://hooks.example.com/", "https://hooks.example.com"},
		// Opaque, and not a URL at all: cut by hand.
		{"https:hooks.example.com?token=s3cret", "https:hooks.example.com"},
		{"https://u:s3cret@hooks.example.com/in\x7f?token=s3cret", "https://hooks.example.com/…"},
		{"://u:s3cret@host/p?s3cret", "://host/…"},
		{"", ""},
	} {
		if got := webhook.Redact(tc.in); got != tc.want || strings.Contains(got, "s3cret") {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestErrorsRedactTheURL: what Send and ValidateURL report, which ends
// up in logs and the job's stored errors, never carries the URL's path,
// query, userinfo or fragment.
func TestErrorsRedactTheURL(t *testing.T) {
	t.Parallel()
	signer := mustSigner(t, mustSecret(t))
	const secret = "s3cret"

	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/in/" + secret + "?token=" + secret
	ln.Close()

	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://elsewhere.example.com/next?token="+secret, http.StatusFound)
	}))
	t.Cleanup(redirect.Close)

	sender := webhook.NewSender(webhook.Config{AllowLoopback: true})
	for _, tc := range []struct{ name, url, want string }{
		{"connection refused", refused, ln.Addr().String() + "/…"},
		{"redirect not followed", redirect.URL + "/in?token=" + secret, "elsewhere.example.com/…"},
		{"invalid URL", "http://hooks.example.com/in\x7f?token=" + secret, "hooks.example.com/…"},
		{"forbidden address", "http://10.0.0.1/in?token=" + secret, "10.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sender.Send(context.Background(), webhook.Message{URL: tc.url, ID: "evt_1", Body: []byte(`{}`), Signer: signer})
			if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Send error %q: want it to name %q without the secret", err, tc.want)
			}
			if err := webhook.ValidateURL(tc.url); err != nil && strings.Contains(err.Error(), secret) {
				t.Fatalf("ValidateURL error %q carries the secret", err)
			}
		})
	}
}
