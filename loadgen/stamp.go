package loadgen

import (
	"bytes"
	"strconv"
	"time"
)

// A stamp is an SSE comment line, ": loadgen-sent=<ns>", ns being the
// time it was made in nanoseconds since the Unix epoch. A server under
// test puts one before each chunk of a streamed answer as it sends it;
// SSE readers ignore comment lines, and a gateway that passes the stream
// through passes them on, so the generator can tell how long each chunk
// took to reach it (Config.ChunkStamps, Result.Chunk).
var stampPrefix = []byte(": loadgen-sent=")

// AppendStamp appends the stamp of t, with its newline, to b.
func AppendStamp(b []byte, t time.Time) []byte {
	b = append(b, stampPrefix...)
	b = strconv.AppendInt(b, t.UnixNano(), 10)
	return append(b, '\n')
}

// stampReader finds the stamps in one answer's reads, which may split a
// line anywhere, and keeps the latency of each.
type stampReader struct {
	line      []byte // the start of a line the last read did not end
	latencies []time.Duration
}

// read takes one read of the body, which returned at now.
func (r *stampReader) read(b []byte, now time.Time) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			// Only a line that may still become a stamp is worth keeping.
			if len(r.line)+len(b) <= len(stampPrefix)+20 {
				r.line = append(r.line, b...)
			} else {
				r.line = append(r.line[:0], '!')
			}
			return
		}
		line := b[:i]
		if len(r.line) > 0 {
			line = append(r.line, line...)
			r.line = r.line[:0]
		}
		b = b[i+1:]
		if ns, ok := bytes.CutPrefix(line, stampPrefix); ok {
			if sent, err := strconv.ParseInt(string(ns), 10, 64); err == nil {
				r.latencies = append(r.latencies, now.Sub(time.Unix(0, sent)))
			}
		}
	}
}
