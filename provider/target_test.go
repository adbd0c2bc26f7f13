package provider

import (
	"context"
	"net/http"
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
