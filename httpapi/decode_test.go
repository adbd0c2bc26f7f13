package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/weir-gateway/weir/openaiwire"
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

// translatedRequest reads of a dialect's translation what decodeRequest
// reads of the body it encodes to, and its withModel writes the same
// bytes.
func TestTranslatedRequestIsDecodeRequest(t *testing.T) {
	t.Parallel()
	five, neg := int64(5), int64(-1)
	img := openaiwire.PartsContent([]openaiwire.Part{{Type: "text", Text: "look"}, {Type: "image_url", ImageURL: &openaiwire.ImageURL{URL: "data:image/png;base64,AA"}}})
	user := func(c openaiwire.Content) []openaiwire.Message {
		return []openaiwire.Message{{Role: "system", Content: openaiwire.TextContent("Be <brief> & \"kind\".")}, {Role: "user", Content: c}}
	}
	for name, c := range map[string]openaiwire.ChatRequest{
		"plain":      {Model: "m", Messages: user(openaiwire.TextContent("hi"))},
		"escaped":    {Model: `m"<x>\y`, Messages: user(openaiwire.TextContent(`{"a":[1]}`))},
		"image":      {Model: "m", Messages: user(img), Stream: true, StreamOptions: &openaiwire.StreamOptions{IncludeUsage: true}},
		"image text": {Model: "m", Messages: user(openaiwire.TextContent("an image_url"))},
		"tokens":     {Model: "m", Messages: user(nil), MaxCompletionTokens: &five, MaxTokens: &five},
		"negative":   {Model: "m", Messages: user(nil), MaxTokens: &neg},
		"no model":   {Messages: user(nil)},
		"long model": {Model: strings.Repeat("m", maxModelName+1), Messages: user(nil)},
		"none":       {Model: "m"},
		"empty":      {Model: "m", Messages: []openaiwire.Message{}},
		"tools": {Model: "m", Messages: user(nil), User: "u1", Tools: []openaiwire.Tool{{Type: "function", Function: openaiwire.Function{Name: "f"}}},
			ResponseFormat: &openaiwire.ResponseFormat{Type: "json_object"}},
		"cache key": {Model: "m", Messages: user(nil), User: "u1", PromptCacheKey: "k1", ResponseFormat: &openaiwire.ResponseFormat{Type: "text"}},
	} {
		t.Run(name, func(t *testing.T) {
			body, err := json.Marshal(&c)
			if err != nil {
				t.Fatal(err)
			}
			want, werr := decodeRequest(epChat, body)
			got, gerr := translatedRequest(epChat, &c)
			if !reflect.DeepEqual(gerr, werr) {
				t.Fatalf("error %v, want %v", gerr, werr)
			}
			if werr != nil {
				return
			}
			if end := len(`{"model":`) + len(mustJSON(t, c.Model)); got.models.first[1] != end {
				t.Errorf("model's value ends at %d, want %d", got.models.first[1], end)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
			for _, up := range []string{"up", `u"p<>`, ""} {
				g, _ := got.withModel(up)
				w, _ := want.withModel(up)
				if !bytes.Equal(g, w) {
					t.Errorf("withModel(%q) = %s, want %s", up, g, w)
				}
			}
		})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
