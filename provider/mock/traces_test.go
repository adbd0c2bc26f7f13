package mock

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

func TestTracedRecordsTraceparent(t *testing.T) {
	s := New(Config{})
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, withTrace := range []bool{false, true} {
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		if withTrace {
			req.Header.Set("traceparent", tp)
		}
		s.ServeHTTP(httptest.NewRecorder(), req)
	}
	got := s.Traced()
	if len(got) != 1 || got[0].Traceparent != tp || got[0].Path != "/v1/chat/completions" {
		t.Fatalf("Traced = %+v, want the one request with traceparent %s", got, tp)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/mock/traces", nil))
	var list struct{ Data []Traced }
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || len(list.Data) != 1 || list.Data[0].Traceparent != tp {
		t.Fatalf("GET /mock/traces = %s (%v)", rec.Body, err)
	}
}

func TestTracedKeepsTheLatest(t *testing.T) {
	var l tracedLog
	for i := range 2*maxTraced + 5 {
		r := httptest.NewRequest(http.MethodGet, "/x", nil)
		r.Header.Set("Traceparent", strconv.Itoa(i))
		l.note(r)
	}
	got := l.list()
	if len(got) != maxTraced {
		t.Fatalf("kept %d, want %d", len(got), maxTraced)
	}
	for i, tr := range got {
		if want := strconv.Itoa(maxTraced + 5 + i); tr.Traceparent != want {
			t.Fatalf("kept[%d] = %s, want %s: the latest, oldest first", i, tr.Traceparent, want)
		}
	}
}
