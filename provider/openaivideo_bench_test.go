package provider

import (
	"net/http"
	"testing"
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
