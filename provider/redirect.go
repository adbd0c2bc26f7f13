package provider

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// maxRedirects is how many redirects a GET follows, as http.Client's
// default policy allows.
const maxRedirects = 10

// credentialHeaders are the headers that carry a platform's credential:
// OpenAI's and Entra's bearer token, Anthropic's x-api-key, Azure's
// api-key, Gemini's x-goog-api-key, AWS's signature and session token.
// http.Client drops only Authorization and Cookie when a redirect leaves
// the domain.
var credentialHeaders = []string{
	"Authorization", "Proxy-Authorization", "Cookie",
	"X-Api-Key", "Api-Key", "X-Goog-Api-Key", "X-Amz-Security-Token",
}

// CheckRedirect is the redirect policy of the clients that call upstreams
// (http.Client.CheckRedirect; docs/operations.md, "Upstream calls").
//
// A call that is not a GET or HEAD, as every inference call is, is never
// redirected: a 301, 302 or 303 would send it again as a GET without its
// body, a 307 or 308 would send it again, its credential headers with
// it, wherever the upstream points. Such an answer fails the call as the
// operator's to fix (Error.Redirect), and the next candidate is tried.
//
// A GET (a task's content) follows up to ten redirects, never from https
// to plain http, and leaves the platform's credential headers behind when
// it leaves the upstream's host: a storage URL that a download is sent to
// carries its own authority.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	first := via[0]
	status := 0
	if req.Response != nil {
		status = req.Response.StatusCode
	}
	if first.Method != http.MethodGet && first.Method != http.MethodHead ||
		first.URL.Scheme == "https" && req.URL.Scheme != "https" {
		return &Error{Status: status, Redirect: redirectTarget(req.URL)}
	}
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	if !strings.EqualFold(req.URL.Host, first.URL.Host) {
		for _, h := range credentialHeaders {
			req.Header.Del(h)
		}
	}
	return nil
}

// redirectTarget is where a redirect points, for logs and errors: its
// scheme, host and path, without a user or a query that may carry a
// signature.
func redirectTarget(u *url.URL) string {
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}
