package webhook

import (
	"errors"
	"net/url"
	"strings"
)

// Redact returns a callback URL fit for logs and error messages: its
// scheme and host, with a path shown as "/…". Receivers' tokens travel in
// the userinfo, the query, the fragment and, for Slack's and Discord's
// incoming webhooks, the path ("https://hooks.example.com/in/T0/s3cret?x"
// becomes "https://hooks.example.com/…"); the task's id finds the whole
// URL for whoever may see it. A URL that does not parse is cut the same
// way by hand. Every log line and error that names a callback URL names
// it through Redact.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" {
		return redactText(raw)
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host}).String() + elided(u.Path != "" && u.Path != "/")
}

// elided marks a path that was cut.
func elided(cut bool) string {
	if cut {
		return "/…"
	}
	return ""
}

// redactText cuts what may carry a secret out of a URL that does not
// parse: everything from the first '?' or '#', and userinfo (up to the
// last '@' of the authority).
func redactText(raw string) string {
	if i := strings.IndexAny(raw, "?#"); i >= 0 {
		raw = raw[:i]
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		scheme, rest = "", raw
	} else {
		scheme += "://"
	}
	authority, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		authority, path = rest[:i], rest[i:]
	}
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		authority = authority[i+1:]
	}
	return scheme + authority + elided(path != "" && path != "/")
}

// redactError redacts the URL of a *url.Error in err (which is how
// net/http reports a failed request, and url.Parse a bad URL), in place.
func redactError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = Redact(ue.URL)
	}
	return err
}
