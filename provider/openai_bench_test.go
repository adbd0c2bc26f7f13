package provider

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// benchAnswer is about the mock's answer: 1 KB of JSON.
var benchAnswer = bytes.Repeat([]byte("x"), 1000)

// benchUpstream answers every call with benchAnswer, as plainly as
// net/http can.
func benchUpstream(b *testing.B) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(benchAnswer)
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

// BenchmarkOpenAIDo is one non-streamed call through the OpenAI adapter
// with its bounds set, as the gateway makes it, its answer read whole
// and closed; BenchmarkOpenAIDo/plain is the same call through the same
// http.Client alone, the floor the adapter adds to. Run with -benchmem:
// allocs/op is what counts on a noisy machine.
func BenchmarkOpenAIDo(b *testing.B) {
	url := benchUpstream(b)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello."}]}`)
	header := http.Header{"Accept": {"application/json"}, "User-Agent": {"bench"}}
	ctx := context.Background()
	read := func(b *testing.B, resp *http.Response) {
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			b.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	b.Run("adapter", func(b *testing.B) {
		o := &OpenAI{BaseURL: url, APIKey: "sk-bench", Client: hc, Timeout: time.Minute, IdleTimeout: time.Minute}
		c := Call{Path: "/chat/completions", Body: body, Header: header}
		b.ReportAllocs()
		for b.Loop() {
			resp, err := o.Do(ctx, c)
			if err != nil {
				b.Fatal(err)
			}
			read(b, resp)
		}
	})
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/chat/completions", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer sk-bench")
			resp, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			read(b, resp)
		}
	})
}
