package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzModelEndpoints sends arbitrary bodies and X-Weir-* header values to
// every model endpoint of a whole API (the bundle: engine, SQLite, the
// mock upstream). Whatever comes in, the answer is never a 5xx of the
// gateway's own making (500): a refusal is a 4xx in the error shape.
func FuzzModelEndpoints(f *testing.F) {
	for _, s := range []struct{ body, prio, wait string }{
		{`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "", ""},
		{`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":9223372036854775807}`, "-2147483648", "1e6"},
		{`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`, "0", "NaN"},
		{`{"model":"m","MODEL":"x","messages":[{}]}`, "1", "0"},
		{`{"model":"m","input":"x"}`, "", "2s"},
		{`{"model":"nope"}`, "", ""},
		{`[]`, "x", "-1"},
	} {
		for i := range endpoints {
			f.Add(uint8(i), []byte(s.body), s.prio, s.wait)
		}
	}
	b := setup(f, setupOpts{})
	h := b.srv.Handler()
	f.Fuzz(func(t *testing.T, which uint8, body []byte, prio, wait string) {
		ep := endpoints[int(which)%len(endpoints)]
		r := httptest.NewRequest(http.MethodPost, "/v1"+ep.path, bytes.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+b.key)
		if prio != "" {
			r.Header[HeaderPriority] = []string{prio}
		}
		if wait != "" {
			r.Header[HeaderMaxWait] = []string{wait}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code >= 500 && w.Code != http.StatusBadGateway && w.Code != http.StatusServiceUnavailable && w.Code != http.StatusGatewayTimeout {
			t.Fatalf("POST %s %q (priority %q, wait %q): %d %s", ep.path, body, prio, wait, w.Code, w.Body)
		}
		if w.Code >= 400 {
			var e errorBody
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Message == "" {
				t.Fatalf("POST %s %q: %d not in the error shape: %s", ep.path, body, w.Code, w.Body)
			}
		}
	})
}
