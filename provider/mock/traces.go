package mock

import (
	"encoding/json"
	"net/http"
	"sync"
)

// maxTraced bounds the traced requests the mock keeps: the latest.
const maxTraced = 1000

// Traced is a request that came with a W3C trace context.
type Traced struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	// Traceparent is the header as received; Tracestate too, if sent.
	Traceparent string `json:"traceparent"`
	Tracestate  string `json:"tracestate,omitempty"`
}

// tracedLog keeps the latest maxTraced traced requests in a ring: once
// full, a request overwrites the oldest, so that noting one costs the
// same however many are kept (a traced benchmark target's requests
// would otherwise pay for shifting the whole log, and the others not).
type tracedLog struct {
	mu   sync.Mutex
	reqs []Traced // up to maxTraced; once full, reqs[next] is the oldest
	next int
}

// note records r if it carries a traceparent: a header lookup and
// nothing more for one that does not.
func (l *tracedLog) note(r *http.Request) {
	tp := r.Header["Traceparent"]
	if len(tp) == 0 {
		return
	}
	t := Traced{Method: r.Method, Path: r.URL.Path, Traceparent: tp[0], Tracestate: r.Header.Get("Tracestate")}
	l.mu.Lock()
	if len(l.reqs) < maxTraced {
		l.reqs = append(l.reqs, t)
	} else {
		l.reqs[l.next] = t
		l.next = (l.next + 1) % maxTraced
	}
	l.mu.Unlock()
}

// list is the requests kept, oldest first.
func (l *tracedLog) list() []Traced {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Traced, 0, len(l.reqs))
	out = append(out, l.reqs[l.next:]...)
	return append(out, l.reqs[:l.next]...)
}

// Traced returns the latest requests (at most 1,000, oldest first) that
// came with a traceparent header, as they came: what a test asserts the
// gateway propagated. GET /mock/traces answers the same list.
func (s *Server) Traced() []Traced { return s.traced.list() }

func (s *Server) serveTraced(w http.ResponseWriter, r *http.Request) {
	if onlyMethod(w, r, http.MethodGet) {
		b, _ := json.Marshal(struct {
			Object string   `json:"object"`
			Data   []Traced `json:"data"`
		}{"list", s.Traced()}) // strings: cannot fail
		writeJSON(w, append(b, '\n'))
	}
}
