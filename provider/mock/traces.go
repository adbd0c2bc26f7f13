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

// tracedLog keeps the latest maxTraced traced requests, oldest first.
type tracedLog struct {
	mu   sync.Mutex
	reqs []Traced
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
	if len(l.reqs) == maxTraced {
		l.reqs = append(l.reqs[:0], l.reqs[1:]...)
	}
	l.reqs = append(l.reqs, t)
	l.mu.Unlock()
}

// Traced returns the latest requests (at most 1,000, oldest first) that
// came with a traceparent header, as they came: what a test asserts the
// gateway propagated. GET /mock/traces answers the same list.
func (s *Server) Traced() []Traced {
	s.traced.mu.Lock()
	defer s.traced.mu.Unlock()
	return append([]Traced(nil), s.traced.reqs...)
}

func (s *Server) serveTraced(w http.ResponseWriter, r *http.Request) {
	if onlyMethod(w, r, http.MethodGet) {
		b, _ := json.Marshal(struct {
			Object string   `json:"object"`
			Data   []Traced `json:"data"`
		}{"list", s.Traced()}) // strings: cannot fail
		writeJSON(w, append(b, '\n'))
	}
}
