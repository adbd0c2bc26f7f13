package config

import (
	"net/url"
	"strings"
)

// validate reports what the tasks section sets wrong: a negative
// backlog bound, a default callback URL that is not an absolute http(s)
// URL, or one with nothing to sign its events.
func (t Tasks) validate() error {
	switch {
	case t.QueueLimit < 0:
		return invalidf("tasks.queue_limit", "must not be negative (0: the default, 10000)")
	case t.DefaultCallbackURL == "":
		return nil
	case t.WebhookSecret == "":
		return invalidf("tasks.webhook_secret", "required with tasks.default_callback_url: its events are signed as tasks' callbacks are")
	}
	u, err := url.Parse(t.DefaultCallbackURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.ContainsAny(t.DefaultCallbackURL, " \t\r\n") {
		return invalidf("tasks.default_callback_url", "want an absolute http or https URL")
	}
	return nil
}
