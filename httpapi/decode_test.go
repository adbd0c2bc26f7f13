package httpapi

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
)

func TestWithModelSplicesEveryModel(t *testing.T) {
	body := `{"model":"public", "messages":[{"role":"user","content":"say \"model\": x"}], "model" : "sneaky","n":1,"MODEL":"sneakier"}`
	r, aerr := decodeRequest(epChat, []byte(body))
	if aerr != nil {
		t.Fatal(aerr)
	}
	out, err := r.withModel("up-model")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"up-model", "messages":[{"role":"user","content":"say \"model\": x"}], "model" : "up-model","n":1,"MODEL":"up-model"}`
	if string(out) != want {
		t.Fatalf("withModel:\n got %s\nwant %s", out, want)
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil || v["model"] != "up-model" {
		t.Fatalf("result %v, %v", v, err)
	}
	// What an upstream written in Go reads (the last member whose name
	// matches in any case).
	var st struct{ Model string }
	if err := json.Unmarshal(out, &st); err != nil || st.Model != "up-model" {
		t.Fatalf("result read into a struct: %+v, %v", st, err)
	}
}

// TestTokenEstimateSaturates: token counts near the int64 maximum give
// the largest estimate, never one that wrapped negative.
func TestTokenEstimateSaturates(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"model":"m","messages":[{}],"max_tokens":9223372036854775807}`,
		`{"model":"m","messages":[{}],"max_completion_tokens":9223372036854775807}`,
		`{"model":"m","messages":[{}],"max_tokens":9223372036854775800}`,
	} {
		req, aerr := decodeRequest(epChat, []byte(body))
		if aerr != nil {
			t.Fatalf("%s: %v", body, aerr)
		}
		if req.estimate != math.MaxInt64 {
			t.Errorf("%s: estimate %d, want %d", body, req.estimate, int64(math.MaxInt64))
		}
	}
}

// TestHugeMaxTokensIsNotAnError: a chat request asking for the most
// tokens an int64 holds is served like any other, not answered 500.
func TestHugeMaxTokensIsNotAnError(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, f := range []string{"max_tokens", "max_completion_tokens"} {
		resp := b.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"`+f+`":9223372036854775807}`, nil)
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			t.Errorf("%s at the int64 maximum: status %d: %s", f, resp.StatusCode, body)
		}
	}
}

// TestModelNameBound: a model name past maxModelName bytes is refused
// with 400 on model rather than looked up and echoed.
func TestModelNameBound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n  int
		ok bool
	}{{256, true}, {257, false}, {1 << 20, false}} {
		body := `{"model":"` + strings.Repeat("m", tc.n) + `","messages":[{}]}`
		_, aerr := decodeRequest(epChat, []byte(body))
		if tc.ok != (aerr == nil) || (aerr != nil && aerr.Param != "model") {
			t.Errorf("a model of %d bytes: %v", tc.n, aerr)
		}
	}
}
