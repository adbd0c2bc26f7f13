package serve

import (
	"testing"

	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/webhook"
)

// TestWebhooksDefaultCallback: tasks.default_callback_url becomes the
// task service's default URL, sent by a sender that may reach the
// operator's private network, while clients' callbacks may not.
func TestWebhooksDefaultCallback(t *testing.T) {
	t.Parallel()
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	const url = "http://10.0.0.5/hooks"
	hooks, err := webhooks(config.Tasks{WebhookSecret: secret, DefaultCallbackURL: url}, config.Spend{})
	if err != nil {
		t.Fatal(err)
	}
	if hooks.DefaultURL != url || hooks.Signer == nil || hooks.OperatorSender == nil {
		t.Fatalf("hooks %+v: want the default URL, a signer and an operator sender", hooks)
	}
	if err := hooks.OperatorSender.ValidateURL(url); err != nil {
		t.Errorf("the operator's sender refuses %s: %v", url, err)
	}
	if err := hooks.Sender.ValidateURL(url); err == nil {
		t.Errorf("clients' sender takes %s, a private address", url)
	}
}
