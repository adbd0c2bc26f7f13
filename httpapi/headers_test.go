package httpapi

import (
	"net/http"
	"net/textproto"
	"strings"
	"testing"
)

// TestHeaderNamesCanonical: the headers read from a request's header
// map by name (askOf's, X-Request-Id) are named in canonical form, the
// only form the server stores them in.
func TestHeaderNamesCanonical(t *testing.T) {
	t.Parallel()
	for _, name := range append(askHeaders[:], "X-Request-Id") {
		if c := textproto.CanonicalMIMEHeaderKey(name); c != name {
			t.Errorf("header %q is read by name, but its canonical form is %q", name, c)
		}
	}
}

// TestRequestHeaders: X-Weir-Max-Wait and X-Weir-Priority out of range,
// not finite or given twice are refused with 400 naming the header, and
// nothing reaches the upstream; their edges are accepted.
func TestRequestHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	const chat = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name   string
		header http.Header
		param  string // "" if accepted
	}{
		{"wait NaN", http.Header{HeaderMaxWait: {"NaN"}}, HeaderMaxWait},
		{"wait Inf", http.Header{HeaderMaxWait: {"Inf"}}, HeaderMaxWait},
		{"wait -Inf", http.Header{HeaderMaxWait: {"-Inf"}}, HeaderMaxWait},
		{"wait past float64", http.Header{HeaderMaxWait: {"1e400"}}, HeaderMaxWait},
		{"wait twice", http.Header{HeaderMaxWait: {"5", "1"}}, HeaderMaxWait},
		{"priority past int32", http.Header{HeaderPriority: {"2147483648"}}, HeaderPriority},
		{"priority below int32", http.Header{HeaderPriority: {"-2147483649"}}, HeaderPriority},
		{"priority not an integer", http.Header{HeaderPriority: {"1.5"}}, HeaderPriority},
		{"priority twice", http.Header{HeaderPriority: {"-1", "0"}}, HeaderPriority},
		{"lowest priority", http.Header{HeaderPriority: {"-2147483648"}}, ""},
		{"wait in seconds", http.Header{HeaderMaxWait: {"0.5"}}, ""},
		{"longest wait", http.Header{HeaderMaxWait: {"1e6"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := b.mock.Stats().Requests
			resp := b.post(t, "/v1/chat/completions", chat, tc.header)
			if tc.param == "" {
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d: %+v", resp.StatusCode, apiErrorOf(t, resp))
				}
				return
			}
			e := apiErrorOf(t, resp)
			if resp.StatusCode != http.StatusBadRequest || e.Param == nil || *e.Param != tc.param {
				t.Fatalf("status %d, error %+v; want 400 on %s", resp.StatusCode, e, tc.param)
			}
			if got := b.mock.Stats().Requests; got != before {
				t.Fatalf("a refused request reached the upstream")
			}
		})
	}
}

// TestIdempotencyKeyBounds: an Idempotency-Key longer than 255 bytes, not
// printable ASCII or given twice is refused with 400 naming the header,
// before anything else about the task is looked at.
func TestIdempotencyKeyBounds(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	const task = `{"model":"m","input":{}}`
	for _, tc := range []struct {
		name string
		keys []string
		ok   bool
	}{
		{"the longest", []string{strings.Repeat("k", 255)}, true},
		{"too long", []string{strings.Repeat("k", 256)}, false},
		{"far too long", []string{strings.Repeat("k", 64<<10)}, false},
		{"not ASCII", []string{"clé"}, false},
		{"twice", []string{"a", "b"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := b.post(t, "/v1/tasks", task, http.Header{HeaderIdempotencyKey: tc.keys})
			e := apiErrorOf(t, resp)
			if tc.ok {
				// The bundle runs no task service: past the checks, 404.
				if resp.StatusCode != http.StatusNotFound {
					t.Fatalf("status %d, error %+v; want it past the key checks", resp.StatusCode, e)
				}
				return
			}
			if resp.StatusCode != http.StatusBadRequest || e.Param == nil || *e.Param != HeaderIdempotencyKey {
				t.Fatalf("status %d, error %+v; want 400 on %s", resp.StatusCode, e, HeaderIdempotencyKey)
			}
		})
	}
}
