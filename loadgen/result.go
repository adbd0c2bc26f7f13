package loadgen

import (
	"errors"
	"net/url"
	"time"
)

// Result is what a run measured: the requests due (open loop) or sent
// (closed loop) inside the measured window.
type Result struct {
	// Open is true for an open-loop run; Rate is the rate it asked for.
	Open bool
	Rate float64
	// Window is the measured part's planned length; Elapsed runs from its
	// start to when the last measured request was sent, and is at least
	// Window: longer when the generator fell behind its schedule (an open
	// loop whose target held MaxInFlight requests), never stretched by how
	// long the last answers took.
	Window, Elapsed time.Duration
	// Requests were sent; Succeeded were answered 2xx and read to the end;
	// Failed were not, for the reasons counted in Errors.
	Requests, Succeeded, Failed int
	Errors                      map[string]int
	// Late went out more than Config.LateAfter behind their due time;
	// Blocked found MaxInFlight requests in flight when they fell due (open
	// loop only).
	Late, Blocked int
	// Latency: successful non-streaming requests, from due to last byte.
	Latency Percentiles
	// Stream and FirstByte: successful streaming requests, from due to the
	// last byte and to the first body byte.
	Stream, FirstByte Percentiles
	// Chunk: with Config.ChunkStamps, every stamped chunk of the
	// successful streaming requests, from its stamp to its arrival.
	Chunk Percentiles
	// SendDelay: every request, from due to sent; the generator's lag.
	SendDelay Percentiles
	// Process is what the whole process spent from the start of the
	// measured window until its last request ended. RunInterleaved's
	// targets share one window, and each of their results holds its
	// whole Process.
	Process ProcessStats
}

// Throughput is successful requests per second over Elapsed: the rate the
// target sustained.
func (r Result) Throughput() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Succeeded) / r.Elapsed.Seconds()
}

// SuccessRatio is Succeeded / Requests (0 with no requests).
func (r Result) SuccessRatio() float64 {
	if r.Requests == 0 {
		return 0
	}
	return float64(r.Succeeded) / float64(r.Requests)
}

// reason is an error's message without the request's method and URL, so
// that failures of one kind count under one key.
func reason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	if len(msg) > 80 {
		msg = msg[:80]
	}
	return msg
}

// maxReasons bounds Result.Errors; further reasons count under "other".
const maxReasons = 16

func (g *generator) summarize(samples []sample) Result {
	res := Result{Window: g.cfg.Duration, Errors: map[string]int{}}
	var lat, stream, first, delay, chunks []time.Duration
	windowStart := g.cfg.Warmup
	last := windowStart + g.cfg.Duration
	for i := range samples {
		s := &samples[i]
		if !s.used {
			continue // never sent: the run was cancelled
		}
		res.Requests++
		d := s.sent - s.due
		delay = append(delay, d)
		if d > g.cfg.LateAfter {
			res.Late++
		}
		last = max(last, s.sent)
		if !s.ok {
			res.Failed++
			key := s.failure
			if _, ok := res.Errors[key]; !ok && len(res.Errors) >= maxReasons {
				key = "other"
			}
			res.Errors[key]++
			continue
		}
		res.Succeeded++
		if s.stream {
			stream = append(stream, s.done-s.due)
			first = append(first, s.firstByte-s.due)
			chunks = append(chunks, s.chunks...)
		} else {
			lat = append(lat, s.done-s.due)
		}
	}
	res.Elapsed = last - windowStart
	res.Latency = Summarize(lat)
	res.Stream = Summarize(stream)
	res.FirstByte = Summarize(first)
	res.Chunk = Summarize(chunks)
	res.SendDelay = Summarize(delay)
	return res
}
