package loadgen

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// A stamp split across reads counts at the read that completes it; other
// lines, however long and wherever split, count nothing.
func TestStampReaderAcrossReads(t *testing.T) {
	t.Parallel()
	sent := time.Unix(1000, 0)
	var body []byte
	body = append(body, "data: "...)
	for range 100 {
		body = append(body, `{"a long line":"that is no stamp"}`...)
	}
	body = append(body, "\n\n"...)
	body = AppendStamp(body, sent)
	body = append(body, "data: {}\n\n"...)
	body = AppendStamp(body, sent.Add(time.Millisecond))
	body = append(body, ": loadgen-sent=x\n: other comment\ndata: [DONE]\n\n"...)

	// Where each stamp's line ends, and when it was made.
	ends := []int{
		bytes.Index(body, []byte("000\n")) + 3,
		bytes.Index(body, []byte("1000000\n")) + 7,
	}
	made := []time.Time{sent, sent.Add(time.Millisecond)}
	for _, step := range []int{1, 7, 40, len(body)} {
		// Read j returns (j+1) ms after the first stamp was made.
		var r stampReader
		for j, i := 0, 0; i < len(body); j, i = j+1, i+step {
			r.read(body[i:min(i+step, len(body))], sent.Add(time.Duration(j+1)*time.Millisecond))
		}
		if len(r.latencies) != 2 {
			t.Fatalf("reads of %d bytes: %d stamps %v, want 2", step, len(r.latencies), r.latencies)
		}
		for k, end := range ends {
			read := end / step
			want := sent.Add(time.Duration(read+1) * time.Millisecond).Sub(made[k])
			if r.latencies[k] != want {
				t.Errorf("reads of %d bytes: stamp %d's latency %s, want %s (its line ends in read %d)", step, k, r.latencies[k], want, read)
			}
		}
	}
}

// Run reads the stamps of streamed answers into Result.Chunk, and only
// when asked to.
func TestChunkStampsInResult(t *testing.T) {
	t.Parallel()
	const chunks = 4
	// Each chunk is stamped 3ms before it is sent, so none can arrive
	// sooner than 3ms after its stamp.
	const behind = 3 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for range chunks {
			b := AppendStamp(nil, time.Now().Add(-behind))
			b = append(b, "data: {}\n\n"...)
			_, _ = w.Write(b)
			_ = http.NewResponseController(w).Flush()
		}
	}))
	defer srv.Close()
	for _, stamps := range []bool{true, false} {
		res, err := Run(context.Background(), Config{
			Target:         Target{URL: srv.URL},
			Rate:           200,
			Duration:       50 * time.Millisecond,
			StreamFraction: 0.5,
			ChunkStamps:    stamps,
			Client:         srv.Client(),
		})
		if err != nil {
			t.Fatal(err)
		}
		streams := res.Stream.N
		if res.Succeeded != 10 || streams != 5 {
			t.Fatalf("stamps %v: %d succeeded, %d streams; want 10 and 5", stamps, res.Succeeded, streams)
		}
		switch {
		case !stamps && res.Chunk.N != 0:
			t.Errorf("without ChunkStamps: %d chunk samples, want none", res.Chunk.N)
		case stamps && res.Chunk.N != chunks*streams:
			t.Errorf("chunk samples %d, want %d (every chunk of every stream, none of the plain answers)", res.Chunk.N, chunks*streams)
		case stamps && (res.Chunk.P50 < behind || res.Chunk.Max > time.Second):
			t.Errorf("chunk latency %v, want each at least %s and under a second", res.Chunk, behind)
		}
	}
}
