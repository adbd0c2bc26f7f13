package provider

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// roundTripUpstream answers by path: 200, 500, every redirect status
// with a Location absolute or relative, one without a Location, one whose
// Location does not parse, and a redirect with a body too long to read
// before closing it.
func roundTripUpstream(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		p := r.URL.Path
		switch {
		case p == "/ok":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"ok":true}`)
		case p == "/fail":
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":"no"}`)
		case p == "/noloc":
			w.WriteHeader(http.StatusTemporaryRedirect)
		case p == "/badloc":
			w.Header().Set("Location", "http://[::1")
			w.WriteHeader(http.StatusFound)
		case p == "/long":
			w.Header().Set("Location", "http://elsewhere.example/v1/x?sig=secret")
			w.WriteHeader(http.StatusFound)
			_, _ = w.Write(bytes.Repeat([]byte("x"), 8<<10))
		case strings.HasPrefix(p, "/rel/"):
			status, _ := strconv.Atoi(strings.TrimPrefix(p, "/rel/"))
			w.Header().Set("Location", "../other?sig=secret")
			w.WriteHeader(status)
		case strings.HasPrefix(p, "/abs/"):
			status, _ := strconv.Atoi(strings.TrimPrefix(p, "/abs/"))
			w.Header().Set("Location", "https://elsewhere.example/v1/chat?sig=secret")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, "moved")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestDoAnswersAsClientDo: do, taking the transport's way, answers every
// kind of call and answer as http.Client.Do does under CheckRedirect:
// the same response, or an error of the same text and kind.
func TestDoAnswersAsClientDo(t *testing.T) {
	t.Parallel()
	up := roundTripUpstream(t)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	hc := &http.Client{Transport: &http.Transport{}, CheckRedirect: CheckRedirect}
	t.Cleanup(hc.CloseIdleConnections)

	urls := []string{
		up.URL + "/ok", up.URL + "/fail", up.URL + "/noloc", up.URL + "/badloc", up.URL + "/long",
		closed.URL + "/ok",
		strings.Replace(up.URL, "http:", "https:", 1) + "/ok", // TLS spoken to plain HTTP
	}
	for _, status := range []int{301, 302, 303, 307, 308} {
		urls = append(urls, up.URL+"/rel/"+strconv.Itoa(status), up.URL+"/abs/"+strconv.Itoa(status))
	}
	body := []byte(`{"model":"m"}`)
	// Requests as the adapters make them: a body that can be sent again
	// (newRequest's), one that cannot (an upload), none, and other methods.
	kinds := map[string]func(u string) *http.Request{
		"post": func(u string) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
			return r
		},
		"upload": func(u string) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, u, nil)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			return r
		},
		"upload-unknown-length": func(u string) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, u, nil)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), 0
			return r
		},
		"empty-upload": func(u string) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, u, nil)
			r.Body = http.NoBody
			return r
		},
		"delete": func(u string) *http.Request {
			r, _ := http.NewRequest(http.MethodDelete, u, nil)
			return r
		},
		"put": func(u string) *http.Request {
			r, _ := http.NewRequest(http.MethodPut, u, bytes.NewReader(body))
			return r
		},
	}
	for name, newReq := range kinds {
		for _, u := range urls {
			want := newReq(u)
			got := newReq(u)
			if !direct(hc, got) {
				t.Fatalf("%s %s: not sent directly", name, u)
			}
			wresp, werr := hc.Do(want)
			gresp, gerr := do(hc, got)
			if e := sameAnswer(wresp, werr, gresp, gerr); e != "" {
				t.Errorf("%s %s: %s", name, u, e)
			}
		}
	}
}

// sameAnswer says how two answers to a call differ, or "" if they do not.
func sameAnswer(wresp *http.Response, werr error, gresp *http.Response, gerr error) string {
	if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
		return "error " + errText(gerr) + ", want " + errText(werr)
	}
	if werr != nil {
		var wu, gu *url.Error
		if !errors.As(werr, &wu) || !errors.As(gerr, &gu) || wu.Op != gu.Op || wu.URL != gu.URL {
			return "url.Error " + errText(gu) + ", want " + errText(wu)
		}
		var wpe, gpe *Error
		if errors.As(werr, &wpe) != errors.As(gerr, &gpe) || wpe != nil && (wpe.Status != gpe.Status || wpe.Redirect != gpe.Redirect) {
			return "*Error differs"
		}
		if errors.Is(werr, http.ErrSchemeMismatch) != errors.Is(gerr, http.ErrSchemeMismatch) {
			return "ErrSchemeMismatch differs"
		}
		var wne, gne interface{ Timeout() bool }
		if errors.As(werr, &wne) != errors.As(gerr, &gne) || wne != nil && wne.Timeout() != gne.Timeout() {
			return "timeout differs"
		}
	}
	if (wresp == nil) != (gresp == nil) {
		return "response presence differs"
	}
	if wresp == nil {
		return ""
	}
	wb, _ := io.ReadAll(wresp.Body)
	gb, _ := io.ReadAll(gresp.Body)
	wresp.Body.Close()
	gresp.Body.Close()
	if wresp.StatusCode != gresp.StatusCode || !bytes.Equal(wb, gb) ||
		wresp.Header.Get("Location") != gresp.Header.Get("Location") {
		return "response " + strconv.Itoa(gresp.StatusCode) + " " + string(gb) + ", want " + strconv.Itoa(wresp.StatusCode) + " " + string(wb)
	}
	return ""
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestDirect: only a call CheckRedirect never redirects, on a client with
// nothing more for Client.Do to do, goes by the transport alone.
func TestDirect(t *testing.T) {
	t.Parallel()
	jar, _ := cookiejar.New(nil)
	policy := &http.Client{CheckRedirect: CheckRedirect}
	req := func(method, u string) *http.Request {
		r, _ := http.NewRequest(method, u, nil)
		return r
	}
	for _, tc := range []struct {
		name string
		hc   *http.Client
		req  *http.Request
		want bool
	}{
		{"post", policy, req(http.MethodPost, "http://up.example/v1"), true},
		{"delete", policy, req(http.MethodDelete, "http://up.example/v1"), true},
		{"get", policy, req(http.MethodGet, "http://up.example/v1"), false},
		{"head", policy, req(http.MethodHead, "http://up.example/v1"), false},
		{"default policy", &http.Client{}, req(http.MethodPost, "http://up.example/v1"), false},
		{"another policy", &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
			req(http.MethodPost, "http://up.example/v1"), false},
		{"jar", &http.Client{CheckRedirect: CheckRedirect, Jar: jar}, req(http.MethodPost, "http://up.example/v1"), false},
		{"timeout", &http.Client{CheckRedirect: CheckRedirect, Timeout: time.Second}, req(http.MethodPost, "http://up.example/v1"), false},
		{"user in URL", policy, req(http.MethodPost, "http://u:p@up.example/v1"), false},
	} {
		if got := direct(tc.hc, tc.req); got != tc.want {
			t.Errorf("%s: direct %v, want %v", tc.name, got, tc.want)
		}
	}
	// do relies on this: CheckRedirect refuses whatever is not a GET or HEAD.
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, "QUERY"} {
		first := req(m, "http://up.example/v1")
		hop := &http.Request{Method: m, URL: &url.URL{Scheme: "http", Host: "up.example", Path: "/v2"}, Header: http.Header{},
			Response: &http.Response{StatusCode: http.StatusTemporaryRedirect}}
		if err := CheckRedirect(hop, []*http.Request{first}); err == nil {
			t.Errorf("CheckRedirect follows a %s", m)
		}
	}
}

// cannedTransport answers every call at once with a 200 and an empty
// body, so that a benchmark of a call's sending counts only the client's
// work.
type cannedTransport struct{}

func (cannedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req, ContentLength: 0}, nil
}

// BenchmarkDo is one inference call's sending over a transport that does
// nothing: /client through http.Client.Do, /direct through do, which
// goes by the transport alone.
func BenchmarkDo(b *testing.B) {
	hc := &http.Client{Transport: cannedTransport{}, CheckRedirect: CheckRedirect}
	body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello."}]}`)
	header := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json"}, "User-Agent": {"bench"}, "Authorization": {"Bearer sk-bench"}}
	for _, tc := range []struct {
		name string
		send func(*http.Request) (*http.Response, error)
	}{
		{"client", hc.Do},
		{"direct", func(r *http.Request) (*http.Response, error) { return do(hc, r) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, "http://up.example/v1/chat/completions", bytes.NewReader(body))
				req.Header = header
				resp, err := tc.send(req)
				if err != nil {
					b.Fatal(err)
				}
				_ = resp.Body.Close()
			}
		})
	}
}
