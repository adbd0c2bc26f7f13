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
	req, err := http.NewRequest(http.MethodGet, strings.TrimRight(base, "/")+path, nil)
	if err != nil {
		return nil, err
	}
	t = &target{url: *req.URL, host: req.Host}
	targets.mu.Lock()
	if len(targets.m) < maxTargets {
		targets.m[k] = t
	}
	targets.mu.Unlock()
	return t, nil
}
