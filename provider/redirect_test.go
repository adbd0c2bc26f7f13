package provider

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// redirectPair is an upstream that redirects every call to target, with
// the given status, and the target, which records what reaches it.
func redirectPair(t *testing.T, status int) (upstream string, got chan *http.Request) {
	t.Helper()
	got = make(chan *http.Request, 4)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got <- r
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(target.Close)
	// The target by another name: a redirect that leaves the host.
	elsewhere := strings.Replace(target.URL, "127.0.0.1", "localhost", 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		http.Redirect(w, r, elsewhere+r.URL.Path+"?sig=secret", status)
	}))
	t.Cleanup(up.Close)
	return up.URL, got
}

// TestCallWithABodyIsNotRedirected: an inference call that an upstream
// redirects, with any redirect status, fails retryable with where it was
// sent (no query), and nothing reaches the place it points to: neither
// the call again (307, 308) nor a bodiless GET (301–303), nor the key.
func TestCallWithABodyIsNotRedirected(t *testing.T) {
	t.Parallel()
	for _, status := range []int{301, 302, 303, 307, 308} {
		up, got := redirectPair(t, status)
		client := &http.Client{Transport: &http.Transport{}, CheckRedirect: CheckRedirect}
		for _, a := range []Adapter{
			&OpenAI{BaseURL: up + "/v1", APIKey: "sk-secret", Client: client},
			&Anthropic{BaseURL: up + "/v1", APIKey: "sk-ant-secret", Client: client},
		} {
			_, err := a.Do(t.Context(), Call{Path: "/chat/completions", Body: []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)})
			var pe *Error
			if !errors.As(err, &pe) || pe.Status != status || !pe.Retryable() ||
				!strings.HasSuffix(pe.Redirect, "/v1/chat/completions") && !strings.HasSuffix(pe.Redirect, "/v1/messages") {
				t.Fatalf("%d, %T: %v (%#v); want a retryable redirect error", status, a, err, pe)
			}
			if msg := err.Error(); strings.Contains(msg, "secret") || !strings.Contains(msg, "base_url") {
				t.Errorf("%d: message %q", status, msg)
			}
		}
		select {
		case r := <-got:
			t.Errorf("%d: the redirect's target got %s %s", status, r.Method, r.URL)
		default:
		}
	}
}

// TestGetFollowsRedirectsWithoutTheKey: a video's content, a GET, follows
// its upstream's redirect; leaving the host, it leaves the platform's key
// behind.
func TestGetFollowsRedirectsWithoutTheKey(t *testing.T) {
	t.Parallel()
	up, got := redirectPair(t, http.StatusFound)
	client := &http.Client{Transport: &http.Transport{}, CheckRedirect: CheckRedirect}
	v := &OpenAIVideo{BaseURL: up + "/v1", APIKey: "sk-secret", Client: client}
	resp, err := v.Content(t.Context(), "video_1", "")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	r := <-got
	if r.Method != http.MethodGet || r.URL.Query().Get("sig") != "secret" {
		t.Errorf("the target got %s %s", r.Method, r.URL)
	}
	for _, h := range credentialHeaders {
		if v := r.Header.Get(h); v != "" {
			t.Errorf("the target got %s: %q", h, v)
		}
	}
}

// TestGetRedirectPolicy: a GET redirect within the upstream's host keeps
// the key, one to another host drops every credential header that
// http.Client would pass on; one from https to plain http is not
// followed; a chain stops at ten.
func TestGetRedirectPolicy(t *testing.T) {
	t.Parallel()
	get := func(raw string) *http.Request {
		r, err := http.NewRequest(http.MethodGet, raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range credentialHeaders {
			r.Header.Set(h, "k")
		}
		r.Response = &http.Response{StatusCode: http.StatusFound}
		return r
	}
	first := get("https://up.example/v1/videos/1/content")
	same := get("https://UP.example/other")
	if err := CheckRedirect(same, []*http.Request{first}); err != nil || same.Header.Get("Api-Key") != "k" {
		t.Errorf("same host: %v, key %q", err, same.Header.Get("Api-Key"))
	}
	other := get("https://cdn.example/x")
	if err := CheckRedirect(other, []*http.Request{first}); err != nil || len(other.Header) != 0 {
		t.Errorf("another host: %v, headers %v", err, other.Header)
	}
	var pe *Error
	if err := CheckRedirect(get("http://cdn.example/x"), []*http.Request{first}); !errors.As(err, &pe) || pe.Redirect != "http://cdn.example/x" {
		t.Errorf("https to http: %v", err)
	}
	via := make([]*http.Request, maxRedirects)
	for i := range via {
		via[i] = first
	}
	if err := CheckRedirect(get("https://up.example/y"), via); err == nil {
		t.Error("the eleventh redirect was followed")
	}
}
