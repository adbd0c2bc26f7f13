package provider

import (
	"context"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// A call's request has the URL and Host http.NewRequest makes of the
// joined base URL and path, the first time and from the cache after,
// and past the cache's bound.
func TestNewRequestTarget(t *testing.T) {
	cases := [][2]string{
		{"https://api.openai.com/v1", "/chat/completions"},
		{"https://api.openai.com/v1/", "/chat/completions"},
		{"http://127.0.0.1:8080//", "/v1/models?limit=2"},
		{"http://example.com:/v1", "/embeddings"},
		{"http://user:pw@Example.COM:443/a%20b", "/c?d=%2F#frag"},
		{"http://[::1]:9/x", "/videos/vid_1/content?variant=thumbnail"},
	}
	for i := range maxTargets + 2 {
		cases = append(cases, [2]string{"http://bound.test/" + strconv.Itoa(i), "/p"})
	}
	for _, c := range cases {
		want, err := http.NewRequest(http.MethodPost, strings.TrimRight(c[0], "/")+c[1], nil)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			got, err := newRequest(context.Background(), http.MethodPost, c[0], c[1], "", []byte("{}"), nil)
			if err != nil {
				t.Fatalf("%q %q: %v", c[0], c[1], err)
			}
			if !reflect.DeepEqual(got.URL, want.URL) || got.Host != want.Host || got.URL.String() != want.URL.String() {
				t.Fatalf("%q %q: URL %#v host %q, want %#v host %q", c[0], c[1], got.URL, got.Host, want.URL, want.Host)
			}
			got.URL.Path = "/changed" // the request's own copy
		}
	}
	if _, err := newRequest(context.Background(), http.MethodPost, "http://bad host", "/x", "", nil, nil); err == nil {
		t.Error("newRequest of a URL with a space in its host: no error")
	}
	targets.mu.RLock()
	n := len(targets.m)
	targets.mu.RUnlock()
	if n != maxTargets {
		t.Errorf("%d targets cached, want the bound %d", n, maxTargets)
	}
}

// A job's target has the URL and Host http.NewRequest makes of the base
// URL joined to the collection and the escaped id, whatever the id and
// the base; one of a plain id under a plain base is made from the
// collection's target, with no target of its own kept.
func TestItemTarget(t *testing.T) {
	bases := []string{"https://api.openai.com/v1", "https://api.openai.com/v1/", "http://127.0.0.1:8080//", "http://example.com:",
		"http://user:pw@Example.COM:443/a%20b", "http://h/a%2Fb", "http://h/v1?api-version=2025", "http://h/v1#f", "http://h/v1?", "http://[::1]:9/x"}
	ids := []string{"video_68d7512d07848190b3e45da0ecbebcde", "v-1.2~3", ".", "..", "a/b", "a b", "a%2Fb", "é", "a?b", "a#b", "a;b", "A+B"}
	for _, base := range bases {
		for _, id := range ids {
			for _, tail := range [][2]string{{"", ""}, {"/content", ""}, {"/content", "variant=thumbnail"}} {
				path := "/videos/" + url.PathEscape(id) + tail[0]
				if tail[1] != "" {
					path += "?" + tail[1]
				}
				want, err := http.NewRequest(http.MethodGet, strings.TrimRight(base, "/")+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				got, err := itemTargetOf(base, "/videos", id, tail[0], tail[1])
				if err != nil {
					t.Fatalf("%q %q %q: %v", base, id, tail, err)
				}
				if !reflect.DeepEqual(&got.url, want.URL) || got.host != want.Host || got.url.String() != want.URL.String() {
					t.Errorf("%q %q %q: URL %#v host %q, want %#v host %q", base, id, tail, got.url, got.host, want.URL, want.Host)
				}
			}
		}
	}
	// An empty cache, which the test of its bound may have filled.
	targets.mu.Lock()
	saved := targets.m
	targets.m = make(map[[2]string]*target)
	targets.mu.Unlock()
	defer func() {
		targets.mu.Lock()
		targets.m = saved
		targets.mu.Unlock()
	}()
	for i := range 100 {
		if _, err := itemTargetOf("http://drain.test/v1", "/videos", "video_"+strconv.Itoa(i), "", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := itemTargetOf("http://drain.test/v1", "/videos", "video_"+strconv.Itoa(i), "/content", "variant=video"); err != nil {
			t.Fatal(err)
		}
	}
	targets.mu.RLock()
	n := len(targets.m)
	targets.mu.RUnlock()
	if n != 1 {
		t.Errorf("%d targets kept for 100 jobs' polls and contents, want the collection's alone", n)
	}
}
