package provider

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// benchVideos are video objects as a poll reads them, in the shape
// OpenAI (and the mock) writes them: one still running, one done.
var benchVideos = []struct{ name, body string }{
	{"in_progress", `{"id":"video_68d7512d07848190b3e45da0ecbebcde004da08e1e0678d5","object":"video","model":"sora-2","status":"in_progress","progress":37,"created_at":1758941485,"completed_at":null,"expires_at":null,"prompt":"A calico cat playing a piano on stage, warm spotlight, slow dolly in","seconds":"8","size":"720x1280","remixed_from_video_id":null,"error":null}` + "\n"},
	{"completed", `{"id":"video_68d7512d07848190b3e45da0ecbebcde004da08e1e0678d5","object":"video","model":"sora-2","status":"completed","progress":100,"created_at":1758941485,"completed_at":1758941607,"expires_at":1759028007,"prompt":"A calico cat playing a piano on stage, warm spotlight, slow dolly in","seconds":"8","size":"720x1280","remixed_from_video_id":null,"error":null}` + "\n"},
}

// BenchmarkDecodeVideo is a poll's decoding of the upstream's video
// object into a Job.
func BenchmarkDecodeVideo(b *testing.B) {
	for _, v := range benchVideos {
		body := []byte(v.body)
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeVideo(http.StatusOK, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOpenAIVideoPoll is one poll through the video adapter with its
// bounds set, as the task worker makes it, of one of many jobs (a drain
// polls each job by its own id), the answer an in-progress video object;
// BenchmarkOpenAIVideoPoll/plain is the same GET through the same
// http.Client alone, read whole, the floor the adapter adds to. Run with
// -benchmem: allocs/op is what counts on a noisy machine.
func BenchmarkOpenAIVideoPoll(b *testing.B) {
	answer := []byte(benchVideos[0].body)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	b.Cleanup(srv.Close)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	ids := make([]string, 8192)
	for i := range ids {
		ids[i] = fmt.Sprintf("video_68d7512d07848190b3e45da0ecbe%014d", i)
	}
	ctx := context.Background()
	b.Run("adapter", func(b *testing.B) {
		v := &OpenAIVideo{BaseURL: srv.URL + "/v1", APIKey: "sk-bench", Client: hc,
			Timeout: time.Minute, IdleTimeout: time.Minute, CallTimeout: time.Minute}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := v.Poll(ctx, ids[i%len(ids)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/videos/"+ids[i%len(ids)], nil)
			if err != nil {
				b.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer sk-bench")
			resp, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadAll(resp.Body); err != nil {
				b.Fatal(err)
			}
			_ = resp.Body.Close()
			i++
		}
	})
}
