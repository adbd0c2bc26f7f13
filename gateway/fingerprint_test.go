package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/weir-gateway/weir"
)

func TestRequestFingerprint(t *testing.T) {
	t.Parallel()
	input := func(t *testing.T, body string) map[string]json.RawMessage {
		t.Helper()
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	type req struct {
		kind, model, body, callback string
		events                      []weir.TaskEvent
	}
	base := req{"task", "sora-2", `{"prompt":"a cat","seconds":"8","opts":{"a":1,"b":[1,2]}}`, "https://hooks.example.com/a", nil}
	fp := func(t *testing.T, r req) string {
		t.Helper()
		got, err := requestFingerprint(r.kind, r.model, input(t, r.body), r.callback, r.events, "", "")
		if err != nil {
			t.Fatalf("requestFingerprint(%+v): %v", r, err)
		}
		if len(got) != 64 {
			t.Fatalf("fingerprint %q is not a hex SHA-256", got)
		}
		return got
	}
	want := fp(t, base)
	for _, tc := range []struct {
		name string
		r    req
		same bool
	}{
		{"the same request", base, true},
		{"keys in another order", req{"task", "sora-2", `{"opts":{"b":[1,2],"a":1},"seconds":"8","prompt":"a cat"}`, base.callback, nil}, true},
		{"other whitespace", req{"task", "sora-2", "{ \"prompt\" : \"a cat\",\n\t\"seconds\":\"8\", \"opts\": {\"a\": 1, \"b\": [1, 2]}}", base.callback, nil}, true},
		{"other string escapes", req{"task", "sora-2", `{"prompt":"a \u0063at","seconds":"8","opts":{"a":1,"b":[1,2]}}`, base.callback, nil}, true},
		{"another prompt", req{"task", "sora-2", `{"prompt":"a dog","seconds":"8","opts":{"a":1,"b":[1,2]}}`, base.callback, nil}, false},
		{"a number for a string", req{"task", "sora-2", `{"prompt":"a cat","seconds":8,"opts":{"a":1,"b":[1,2]}}`, base.callback, nil}, false},
		{"a nested change", req{"task", "sora-2", `{"prompt":"a cat","seconds":"8","opts":{"a":1,"b":[2,1]}}`, base.callback, nil}, false},
		{"a field more", req{"task", "sora-2", `{"prompt":"a cat","seconds":"8","opts":{"a":1,"b":[1,2]},"size":"1280x720"}`, base.callback, nil}, false},
		{"another kind", req{"video", "sora-2", base.body, base.callback, nil}, false},
		{"another model", req{"task", "sora-2-pro", base.body, base.callback, nil}, false},
		{"another callback", req{"task", "sora-2", base.body, "https://hooks.example.com/b", nil}, false},
		{"no callback", req{"task", "sora-2", base.body, "", nil}, false},
		{"progress events", req{"task", "sora-2", base.body, base.callback, []weir.TaskEvent{weir.TaskEventProgress}}, false},
		{"no events (an empty list)", req{"task", "sora-2", base.body, base.callback, []weir.TaskEvent{}}, true},
		// Field boundaries count: text cannot move from one to the next.
		{"model text moved into the kind", req{"tasks", "ora-2", base.body, base.callback, nil}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fp(t, tc.r); (got == want) != tc.same {
				t.Errorf("fingerprint %s, base %s: same = %v, want %v", got, want, got == want, tc.same)
			}
		})
	}
}

func TestIdempotencyKeyReusedIs422(t *testing.T) {
	t.Parallel()
	if got := weir.CodeIdempotencyKeyReused.Status(); got != http.StatusUnprocessableEntity {
		t.Errorf("status %d, want 422", got)
	}
}

// TestRequestFingerprintStable pins the fingerprint of a request without
// callback events: tasks stored before events existed keep matching their
// repeats.
func TestRequestFingerprintStable(t *testing.T) {
	t.Parallel()
	input := map[string]json.RawMessage{"prompt": json.RawMessage(`"a cat"`)}
	got, err := requestFingerprint("task", "sora-2", input, "https://hooks.example.com/a", nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(`["weir-task-request-v1","task","sora-2",{"prompt":"a cat"},"https://hooks.example.com/a"]`))
	if want := hex.EncodeToString(sum[:]); got != want {
		t.Errorf("fingerprint %s, want %s (as before callback events)", got, want)
	}
}
