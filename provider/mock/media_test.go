package mock

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"image/png"
	"math"
	"net/http"
	"testing"
)

func embed(t *testing.T, f *fixture, body map[string]any) (data []map[string]any, usage map[string]any) {
	t.Helper()
	m := obj(t, expectStatus(t, f.post("/v1/embeddings", body, nil), http.StatusOK))
	hasKeys(t, "embeddings", m, "object", "data", "model", "usage")
	if m["object"] != "list" || m["model"] != body["model"] {
		t.Errorf("object %v, model %v", m["object"], m["model"])
	}
	for i, d := range m["data"].([]any) {
		e := d.(map[string]any)
		hasKeys(t, "embedding", e, "object", "index", "embedding")
		if e["object"] != "embedding" || e["index"] != float64(i) {
			t.Errorf("item %d: %v %v", i, e["object"], e["index"])
		}
		data = append(data, e)
	}
	return data, m["usage"].(map[string]any)
}

func floats(t *testing.T, e map[string]any) []float64 {
	t.Helper()
	switch v := e["embedding"].(type) {
	case []any:
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = x.(float64)
		}
		return out
	case string:
		raw, err := base64.StdEncoding.DecodeString(v)
		if err != nil || len(raw)%4 != 0 {
			t.Fatalf("base64 embedding: %v, %d bytes", err, len(raw))
		}
		out := make([]float64, len(raw)/4)
		for i := range out {
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
		}
		return out
	}
	t.Fatalf("embedding is %T", e["embedding"])
	return nil
}

func TestEmbeddings(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	data, usage := embed(t, f, map[string]any{"model": "text-embedding-3-small", "input": []string{"hello", "hello", "a longer input"}})
	if len(data) != 3 {
		t.Fatalf("%d embeddings", len(data))
	}
	// 2 + 2 + 4 tokens.
	if usage["prompt_tokens"] != 8.0 || usage["total_tokens"] != 8.0 {
		t.Errorf("usage %v", usage)
	}
	a, b, c := floats(t, data[0]), floats(t, data[1]), floats(t, data[2])
	if len(a) != defaultDimensions {
		t.Errorf("%d dimensions, want %d", len(a), defaultDimensions)
	}
	var norm float64
	for _, x := range a {
		norm += x * x
	}
	if math.Abs(norm-1) > 1e-4 {
		t.Errorf("norm² %v, want 1", norm)
	}
	same, diff := true, false
	for i := range a {
		same = same && a[i] == b[i]
		diff = diff || a[i] != c[i]
	}
	if !same || !diff {
		t.Errorf("same input same vector: %v; different input different vector: %v", same, diff)
	}

	// base64 (the Python and Node SDKs' default) decodes to the same
	// float32 values, and dimensions is honoured.
	for _, dims := range []int{8, defaultDimensions} {
		asFloat, _ := embed(t, f, map[string]any{"model": "m", "input": "hello", "dimensions": dims})
		asB64, _ := embed(t, f, map[string]any{"model": "m", "input": "hello", "dimensions": dims, "encoding_format": "base64"})
		x, y := floats(t, asFloat[0]), floats(t, asB64[0])
		if len(x) != dims || len(y) != dims {
			t.Fatalf("dims %d: got %d and %d", dims, len(x), len(y))
		}
		for i := range x {
			if float32(x[i]) != float32(y[i]) {
				t.Fatalf("dims %d: element %d float %v, base64 %v", dims, i, x[i], y[i])
			}
		}
	}

	// Token inputs count their tokens.
	_, usage = embed(t, f, map[string]any{"model": "m", "input": []int{1, 2, 3}})
	if usage["prompt_tokens"] != 3.0 {
		t.Errorf("token input usage %v", usage)
	}
	data, usage = embed(t, f, map[string]any{"model": "m", "input": [][]int{{1, 2}, {3, 4, 5, 6}}})
	if len(data) != 2 || usage["prompt_tokens"] != 6.0 {
		t.Errorf("token arrays: %d items, usage %v", len(data), usage)
	}
}

func TestImages(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	for _, tc := range []struct {
		body      map[string]any
		wantURL   bool
		wantUsage bool
	}{
		{map[string]any{"model": "gpt-image-1", "prompt": "a weir", "n": 2}, false, true},
		{map[string]any{"model": "dall-e-3", "prompt": "a weir"}, true, false},
		{map[string]any{"model": "dall-e-3", "prompt": "a weir", "response_format": "b64_json"}, false, false},
		{map[string]any{"model": "other", "prompt": "a weir", "response_format": "url"}, true, false},
	} {
		m := obj(t, expectStatus(t, f.post("/v1/images/generations", tc.body, nil), http.StatusOK))
		hasKeys(t, "images", m, "created", "data")
		data := m["data"].([]any)
		if want := 1; tc.body["n"] != nil {
			want = tc.body["n"].(int)
			if len(data) != want {
				t.Errorf("%d images, want %d", len(data), want)
			}
		}
		img := data[0].(map[string]any)
		var pngBytes []byte
		if tc.wantURL {
			url, _ := img["url"].(string)
			resp := f.request(context.Background(), http.MethodGet, url[len(f.ts.URL):], nil, nil)
			pngBytes = expectStatus(t, resp, http.StatusOK)
			if url[:len(f.ts.URL)] != f.ts.URL || resp.Header.Get("Content-Type") != "image/png" {
				t.Errorf("url %q, Content-Type %q", url, resp.Header.Get("Content-Type"))
			}
		} else {
			var err error
			if pngBytes, err = base64.StdEncoding.DecodeString(img["b64_json"].(string)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := png.Decode(bytes.NewReader(pngBytes)); err != nil {
			t.Errorf("%v: not a PNG: %v", tc.body, err)
		}
		if _, has := m["usage"]; has != tc.wantUsage {
			t.Errorf("%v: usage present %v", tc.body, has)
		}
	}
}

func TestSpeech(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	for _, tc := range []struct {
		format, ctype string
		check         func([]byte) bool
	}{
		{"", "audio/mpeg", func(b []byte) bool { return len(b)%len(mp3Frame) == 0 && b[0] == 0xFF && b[1] == 0xFB }},
		{"wav", "audio/wav", func(b []byte) bool {
			return string(b[:4]) == "RIFF" && string(b[8:12]) == "WAVE" && int(binary.LittleEndian.Uint32(b[40:])) == len(b)-44
		}},
		{"pcm", "audio/pcm", func(b []byte) bool { return len(b) > 0 && len(b)%2 == 0 }},
		{"opus", "audio/opus", func(b []byte) bool { return len(b) > 0 }},
	} {
		body := map[string]any{"model": "tts-1", "input": "Hello from the mock provider.", "voice": "alloy"}
		if tc.format != "" {
			body["response_format"] = tc.format
		}
		resp := f.post("/v1/audio/speech", body, nil)
		b := expectStatus(t, resp, http.StatusOK)
		if ct := resp.Header.Get("Content-Type"); ct != tc.ctype || !tc.check(b) {
			t.Errorf("format %q: Content-Type %q, %d bytes, check passed %v", tc.format, ct, len(b), tc.check(b))
		}
	}
}

func TestModels(t *testing.T) {
	t.Parallel()
	list := func(f *fixture) []any {
		m := obj(t, expectStatus(t, f.request(context.Background(), http.MethodGet, "/v1/models", nil, nil), http.StatusOK))
		if m["object"] != "list" {
			t.Errorf("object %v", m["object"])
		}
		data := m["data"].([]any)
		for _, d := range data {
			hasKeys(t, "model", d.(map[string]any), "id", "object", "created", "owned_by")
		}
		return data
	}
	anyName := newFixture(t, Config{})
	if got := list(anyName); len(got) != len(DefaultModels) {
		t.Errorf("%d default models", len(got))
	}
	expectStatus(t, anyName.request(context.Background(), http.MethodGet, "/v1/models/whatever", nil, nil), http.StatusOK)
	expectStatus(t, anyName.post("/v1/chat/completions", chatWith(map[string]any{"model": "whatever"}), nil), http.StatusOK)

	some := newFixture(t, Config{Models: []string{"a", "b"}})
	got := list(some)
	if len(got) != 2 || got[1].(map[string]any)["id"] != "b" {
		t.Errorf("models %v", got)
	}
	m := obj(t, expectStatus(t, some.request(context.Background(), http.MethodGet, "/v1/models/a", nil, nil), http.StatusOK))
	if m["id"] != "a" || m["object"] != "model" {
		t.Errorf("model %v", m)
	}
	e := expectError(t, some.request(context.Background(), http.MethodGet, "/v1/models/c", nil, nil), 404, "invalid_request_error")
	if e["code"] != "model_not_found" {
		t.Errorf("code %v", e["code"])
	}
}
