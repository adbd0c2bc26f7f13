package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider"
)

// delivery is how passing an upstream answer to the client went.
type delivery struct {
	// started: the answer began (out.Start was called).
	started bool
	// complete: the whole answer reached the client.
	complete bool
	// upstream is the upstream's failure (a bound passed, the connection
	// broke) if it failed.
	upstream *provider.Error
	// client is the error writing to the client, or reading when the
	// client went away.
	client error
	// outcome is set when the delivery ended in a failure of its own,
	// and err, if nothing was written, is the answer to it.
	outcome Outcome
	err     error
}

// readFailed files err, from reading the upstream's body, in d.
func (d *delivery) readFailed(err error) {
	var pe *provider.Error
	if errors.As(err, &pe) {
		d.upstream = pe
		return
	}
	d.client = err // the client went away: the call was aborted for it
}

// copyBody passes a whole answer on. JSON is read whole (up to
// MaxResponseBytes), the upstream call ended (its lease released), and
// then written with its length and flushed; anything
// else (audio, say) is passed through as it arrives. done ends the
// upstream call.
func (s *Service) copyBody(c *Call, out Answer, resp *http.Response, head Head, done func(usage, bool)) delivery {
	var d delivery
	if !strings.HasPrefix(head.ContentType, "application/json") {
		head.ContentLength = resp.ContentLength
		return s.pump(out, resp, head, done, nil)
	}
	limit := s.cfg.MaxResponseBytes
	var body []byte
	var bp *[]byte // the answerBufs buffer body may be in, until given back
	defer func() {
		if bp != nil {
			answerBufs.Put(bp)
		}
	}()
	over := resp.ContentLength > limit // refused unread
	if !over {
		var err error
		bp = answerBufs.Get().(*[]byte)
		if body, over, err = readCappedInto(resp.Body, resp.ContentLength, limit, *bp); err != nil {
			done(usage{}, false)
			d.readFailed(err)
			return d
		}
	}
	if over {
		done(usage{}, false)
		s.logger(c).Warn("upstream answer over server.max_response_bytes; refused", "limit", limit)
		d.outcome = OutcomeUpstreamTooLarge
		d.err = errorf(ErrUpstream, "", fmt.Sprintf("the upstream's answer is larger than the gateway's limit of %d bytes", limit))
		return d
	}
	u, ok := usageOf(body)
	if c.Model.Kind == weir.KindImages {
		// An image is priced by the one: count what was made.
		u.Images = imagesOf(body)
		ok = ok || u.Images > 0
	}
	done(u, ok)
	head.ContentLength = int64(len(body))
	out.Start(head)
	d.started = true
	// The whole answer goes out now, not when the request's handler
	// returns: the client has it before the end-of-request work (the
	// usage record, metrics, the access log line, spans).
	if _, err := out.Write(body); err != nil {
		d.client = err
	} else if err := out.Flush(); err != nil {
		d.client = err
	} else {
		d.complete = true
	}
	// What the span notes of the answer is read as the span ends, off
	// the request's goroutine: the client waits for none of it. The
	// notes keep the buffer until then.
	if c.obs.notes != nil {
		c.obs.notes.hold(body, bp)
		bp = nil
	}
	return d
}

// firstChunk is the first buffer readCapped reads an answer of unknown
// length into; each next one is twice the size of all before it.
const firstChunk = 32 << 10

// readCapped reads r to its end if that is at most limit bytes; over
// reports that it is longer, having read limit+1 bytes. It allocates
// about what it reads and never more than limit+1 bytes for the reading:
// an answer of known size (declared, at most limit) is read into one
// buffer of that size and a byte more; one of unknown size into chunks
// that are never copied as they grow, joined once at the end if it fits.
// An answer that turns out too large costs the cap once, not twice.
//
// No read goes past limit+1 bytes in all: each buffer is at most what is
// left of them.
func readCapped(r io.Reader, size, limit int64) (body []byte, over bool, err error) {
	return readCappedInto(r, size, limit, nil)
}

// answerBufs are the buffers copyBody reads whole answers into: an
// answer that fits borrows one until it is written. Answer.Write copies
// out of it (or has written it) before it returns, as io.Writer's does,
// so nothing keeps it after copyBody.
var answerBufs = sync.Pool{New: func() any { b := make([]byte, firstChunk); return &b }}

// readCappedInto is readCapped with its first read into spare, if it
// fits: the body it returns may then be spare's.
func readCappedInto(r io.Reader, size, limit int64, spare []byte) (body []byte, over bool, err error) {
	next := int64(firstChunk)
	if size >= 0 {
		next = size + 1 // the byte more tells an answer longer than declared
	}
	var first [4][]byte // most answers fit in one buffer, or a few
	parts := first[:0]
	var total int64
	for {
		want := min(next, limit+1-total)
		var buf []byte
		if int64(cap(spare)) >= want {
			buf, spare = spare[:want], nil // the first read's only
		} else {
			buf = make([]byte, want)
		}
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			parts = append(parts, buf[:n])
			total += int64(n)
		}
		if total > limit {
			return nil, true, nil
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return nil, false, err
		}
		next = max(total, firstChunk)
	}
	switch len(parts) {
	case 0:
		return nil, false, nil
	case 1:
		return parts[0], false, nil
	}
	body = make([]byte, 0, total)
	for _, p := range parts {
		body = append(body, p...)
	}
	return body, false, nil
}

// terminalEvents are the events that end a Responses stream and a
// Messages stream.
var terminalEvents = map[string]bool{"response.completed": true, "response.incomplete": true, "response.failed": true,
	"message_stop": true}

// failureEvents are the events in which a stream passed through as it
// came may report that its upstream failed (provider.StreamFailure):
// Anthropic's and the Responses API's error, and response.failed. Each
// maps to its own name, so that a line's event is named without a copy.
var failureEvents = map[string]string{"error": "error", "response.failed": "response.failed"}

// pumpBufs are pump's read buffers: a streamed answer borrows one for
// its life instead of allocating it. Write copies out of it (or has
// written it) before it returns, so nothing keeps it after pump.
var pumpBufs = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// pump passes resp's body to the client as it arrives, flushing each
// read: the answer starts with the first bytes, so an upstream that fails
// before sending any leaves the client untouched. scan, if set, sees each
// read and reports whether what has been read is the whole answer (an
// SSE stream's [DONE]): a client that hangs up after that has had the
// whole answer, though the upstream's body had not quite ended. It ends
// the upstream call (done, without usage) before it returns.
func (s *Service) pump(out Answer, resp *http.Response, head Head, done func(usage, bool), scan func([]byte) bool) delivery {
	var d delivery
	begin := func() {
		if !d.started {
			out.Start(head)
			d.started = true
		}
	}
	bp := pumpBufs.Get().(*[]byte)
	defer pumpBufs.Put(bp)
	buf := *bp
	whole := false
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			begin()
			if scan != nil {
				whole = scan(buf[:n])
			}
			if _, werr := out.Write(buf[:n]); werr != nil {
				d.client = werr
				break
			}
			if ferr := out.Flush(); ferr != nil {
				d.client = ferr
				break
			}
		}
		if err == io.EOF {
			begin()
			d.complete = true
			break
		}
		if err != nil {
			d.readFailed(err)
			if whole && d.upstream == nil {
				d.client, d.complete = nil, true
			}
			break
		}
	}
	done(usage{}, false)
	return d
}

// stream passes an SSE answer through as it arrives, flushing each read,
// and watches the data lines for a usage report; without one, it counts
// prompt (the request's estimate of its input) and about a token a chunk.
// A Chat Completions stream is whole at its [DONE], a Responses stream at
// the data of its terminal event (response.completed, .incomplete or
// .failed), whose response carries the usage, a Messages stream at its
// message_stop (its usage is message_start's, updated by
// message_delta's). It stops at once when
// the client goes away or stops reading (the write timeout), and when
// the upstream fails mid-stream it ends the stream with an error event,
// as OpenAI's streams report errors. An upstream that reports its own
// failure in the stream (an overload, say) has it passed on as it came,
// and the delivery fails with it as if the read had. obs notes when
// chunks arrive.
func (s *Service) stream(out Answer, resp *http.Response, head Head, prompt int64, obs *callObs, done func(usage, bool)) delivery {
	var (
		line    []byte
		u       usage
		got     bool
		chunks  int64
		sawDone bool
		// terminal: the event line just read names a Responses or
		// Messages stream's last event; delta, a Messages stream's
		// message_delta, whose usage adds to message_start's.
		terminal, delta bool
		// event is that line's event name when it may report a failure
		// (failureEvents); failed, the failure a stream passed through
		// reported in its own words (provider.StreamFailure).
		event  string
		failed *provider.Error
	)
	scan := func(b []byte) bool {
		before := chunks
		for len(b) > 0 {
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				if len(line) < 1<<20 {
					line = append(line, b...)
				}
				break
			}
			line = append(line, b[:i]...)
			b = b[i+1:]
			l := bytes.TrimRight(line, "\r")
			if ev, ok := bytes.CutPrefix(l, []byte("event:")); ok {
				name := bytes.TrimSpace(ev)
				terminal, delta = terminalEvents[string(name)], string(name) == "message_delta"
				event = failureEvents[string(name)]
			}
			if data, ok := bytes.CutPrefix(l, []byte("data:")); ok {
				data = bytes.TrimSpace(data)
				switch {
				case bytes.Equal(data, []byte("[DONE]")):
					sawDone = true
				default:
					sawDone = sawDone || terminal
					chunks++
					if obs.notes != nil {
						obs.notes.read(data)
					}
					if event != "" && failed == nil {
						failed = provider.StreamFailure(event, data)
					}
					if uu, ok := usageOf(data); ok {
						if delta && got {
							uu = u.update(uu)
						}
						u, got = uu, true
					}
				}
			}
			line = line[:0]
		}
		if chunks > before {
			// The chunks this read brought arrived together: one chunk
			// to the GenAI metrics.
			obs.chunk(s.deps.Clock.Now())
		}
		return sawDone
	}
	// Usage is settled when the upstream's part ends, before the lease
	// goes back.
	settle := func(usage, bool) {
		if !got && chunks > 0 {
			// No usage chunk: the prompt was read all the same; count
			// about one token per content chunk on top.
			u = usage{PromptTokens: prompt, CompletionTokens: chunks, counted: true}
		}
		done(u, got || chunks > 0)
	}
	d := s.pump(out, resp, head, settle, scan)
	if d.complete && !sawDone && !got {
		// The upstream ended the stream without finishing it.
		d.complete, d.outcome = false, OutcomeUpstreamBroken
	}
	if d.upstream != nil && d.started {
		category := ErrUpstream
		if d.upstream.Timeout {
			category = ErrUpstreamTimeout
		}
		out.StreamError(errorf(category, "", "the upstream failed mid-stream: "+d.upstream.Error()))
	}
	if d.upstream == nil && failed != nil {
		// The upstream said in its stream that it failed, and the
		// client has had that as it came: nothing is added to it.
		d.upstream, d.complete = failed, false
	}
	return d
}
