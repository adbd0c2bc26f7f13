package provider

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// maxTargets is the most URLs targets holds: far more than a catalog's
// base URLs times its endpoints' paths, and a bound should paths carry
// ids (a video's content). A URL past it is parsed at each call.
const maxTargets = 1024

// target is where a call goes: its URL and its Host header, as
// http.NewRequest makes them from the joined base URL and path.
type target struct {
	url  url.URL
	host string
}

// targets are calls' targets by base URL and path, each parsed once: a
// call's request copies its target's URL instead of joining the two and
// parsing the result again.
var targets = struct {
	mu sync.RWMutex
	m  map[[2]string]*target
}{m: make(map[[2]string]*target)}

// targetOf returns the target of path under base.
func targetOf(base, path string) (*target, error) {
	k := [2]string{base, path}
	targets.mu.RLock()
	t, ok := targets.m[k]
	targets.mu.RUnlock()
	if ok {
		return t, nil
	}
	t, err := parseTarget(base, path)
	if err != nil {
		return nil, err
	}
	targets.mu.Lock()
	if len(targets.m) < maxTargets {
		targets.m[k] = t
	}
	targets.mu.Unlock()
	return t, nil
}

// parseTarget is the target of path under base, parsed.
func parseTarget(base, path string) (*target, error) {
	req, err := http.NewRequest(http.MethodGet, strings.TrimRight(base, "/")+path, nil)
	if err != nil {
		return nil, err
	}
	return &target{url: *req.URL, host: req.Host}, nil
}

// itemTargetOf returns the target of collection/{id}suffix?query under
// base, as targetOf(base, collection+"/"+url.PathEscape(id)+suffix, with
// "?"+query if query is not empty) does. An id of the characters a path
// keeps as they are is joined to collection's target, parsed once,
// without parsing again: a poll's path names its job, and a drain polls
// more jobs than targets holds. Any other id, or a base URL with a query,
// a fragment or a path in escapes of its own, is parsed, and not kept in
// targets either. suffix is a
// fixed path ("/content") and query an encoded query, both of
// characters a URL keeps as they are.
func itemTargetOf(base, collection, id, suffix, query string) (target, error) {
	if plainSegment(id) {
		t, err := targetOf(base, collection)
		if err != nil {
			return target{}, err
		}
		u := &t.url
		if u.Opaque == "" && u.RawPath == "" && u.RawQuery == "" && !u.ForceQuery && u.Fragment == "" && u.RawFragment == "" {
			item := *t
			item.url.Path = u.Path + "/" + id + suffix
			item.url.RawQuery = query
			return item, nil
		}
	}
	path := collection + "/" + url.PathEscape(id) + suffix
	if query != "" {
		path += "?" + query
	}
	t, err := parseTarget(base, path)
	if err != nil {
		return target{}, err
	}
	return *t, nil
}

// plainSegment reports whether s is a path segment of unreserved
// characters only (RFC 3986), which a URL's path keeps unescaped.
func plainSegment(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == '~':
		default:
			return false
		}
	}
	return true
}
