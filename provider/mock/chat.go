package mock

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"
)

type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []chatMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	ResponseFormat      *responseFormat `json:"response_format"`
	Tools               []chatTool      `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	// Metadata's mock_usage, if set, is as X-Mock-Usage (usageReport),
	// for callers that pass no headers on.
	Metadata map[string]string `json:"metadata"`
}

type chatMessage struct {
	// Content is a string, an array of parts, or null; kept raw so only
	// its length is looked at.
	Content json.RawMessage `json:"content"`
}

// reply is what one chat completion answers: text, or JSON (the content
// response_format asks for, or a tool call's arguments), as tokens.
type reply struct {
	tokens int        // tokens sent: the answer's, or fewer when max_tokens cuts it
	finish string     // "stop", "length" or "tool_calls", as JSON
	text   textAnswer // a text answer, when pieces is nil
	pieces []string   // a JSON answer's tokens
	tool   string     // the function called: the answer is its tool call
	callID []byte     // the tool call's id
}

// appendTokens appends tokens [from, to) as the inside of a JSON string.
func (r *reply) appendTokens(b []byte, from, to int) []byte {
	if r.pieces == nil {
		return r.text.append(b, from, to) // needs no escaping
	}
	for _, p := range r.pieces[from:to] {
		q := appendJSONString(nil, p)
		b = append(b, q[1:len(q)-1]...)
	}
	return b
}

// chat serves POST /v1/chat/completions.
func (s *Server) chat(c *call) int {
	var req chatRequest
	if err := json.Unmarshal(c.body, &req); err != nil {
		return c.fail(invalidRequest("", "We could not parse the JSON body of your request: "+err.Error()))
	}
	o, err := parseOverrides(c.r.Header)
	if err != nil {
		return c.fail(invalidRequest("", err.Error()))
	}
	if len(req.Messages) == 0 {
		return c.fail(invalidRequest("messages", "'messages' must hold at least one message."))
	}
	n := c.st.cfg.CompletionTokens
	if o.tokens > 0 {
		n = o.tokens
	}
	r := reply{tokens: n, finish: `"stop"`, text: newTextAnswer(n)}
	tool, apiErr := forcedTool(req.ToolChoice, req.Tools)
	if apiErr != nil {
		return c.fail(*apiErr)
	}
	js, apiErr := structuredJSON(req.ResponseFormat, tool, r.text, s.now)
	if apiErr != nil {
		return c.fail(*apiErr)
	}
	if js != nil {
		r.pieces = jsonTokens(js)
		r.tokens = len(r.pieces)
	}
	if tool != nil {
		r.tool, r.finish = tool.Function.Name, `"tool_calls"`
		r.callID = c.rand.appendID([]byte("call_"), 24)
	}
	limit, param := req.MaxCompletionTokens, "max_completion_tokens"
	if limit == nil {
		limit, param = req.MaxTokens, "max_tokens"
	}
	if limit != nil {
		if *limit < 1 {
			return c.fail(invalidRequest(param, "Invalid '"+param+"': integer below minimum value. Expected a value >= 1, but got "+strconv.Itoa(*limit)+" instead."))
		}
		if *limit < r.tokens {
			r.tokens, r.finish = *limit, `"length"`
		}
	}
	prompt := promptTokens(req.Messages)
	report := o.usage
	if report == noUsageReport {
		if report, err = parseUsageReport(req.Metadata["mock_usage"]); err != nil {
			return c.fail(invalidRequest("metadata", err.Error()))
		}
	}
	if status := s.begin(c, req.Model, o); status != 0 {
		return status
	}
	if !req.Stream {
		// A non-streamed answer comes when the whole generation would have.
		if !wait(c.r.Context(), time.Duration(r.tokens)*c.st.interval) {
			return statusClientClosed
		}
		writeJSON(c.w, s.completion(c, req.Model, &r, report, prompt, len(js)))
		return http.StatusOK
	}

	stall := o.stall == 1 || (o.stall == 0 && c.rand.chance(c.st.cfg.StallRate))
	stallFor := c.st.cfg.StallFor
	if o.stallFor > 0 {
		stallFor = o.stallFor
	}
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	return s.stream(c, req.Model, &r, prompt, report, includeUsage, stall, stallFor)
}

// completion is a non-streamed chat.completion of model saying r, with
// the usage report asks for (prompt tokens in); jsLen is the length of
// the structured answer it carries, if any.
func (s *Server) completion(c *call, model string, r *reply, report usageReport, prompt, jsLen int) []byte {
	b := make([]byte, 0, 640+len(model)+len(r.tool)+textLen(r.tokens)+jsLen*2)
	b = append(b, `{"id":"chatcmpl-`...)
	b = c.rand.appendID(b, 29)
	b = append(b, `","object":"chat.completion","created":`...)
	b = strconv.AppendInt(b, s.now().Unix(), 10)
	b = append(b, `,"model":`...)
	b = appendJSONString(b, model)
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	if r.tool == "" {
		b = append(b, '"')
		b = r.appendTokens(b, 0, r.tokens)
		b = append(b, `","refusal":null,"annotations":[]}`...)
	} else {
		b = append(b, `null,"refusal":null,"annotations":[],"tool_calls":[{"id":"`...)
		b = append(b, r.callID...)
		b = append(b, `","type":"function","function":{"name":`...)
		b = appendJSONString(b, r.tool)
		b = append(b, `,"arguments":"`...)
		b = r.appendTokens(b, 0, r.tokens)
		b = append(b, `"}}]}`...)
	}
	b = append(b, `,"logprobs":null,"finish_reason":`...)
	b = append(b, r.finish...)
	b = append(b, `}]`...)
	if !report.none {
		b = append(b, `,"usage":`...)
		b = appendUsage(b, report, prompt, r.tokens)
	}
	b = append(b, `,"service_tier":"default","system_fingerprint":"fp_weirmock"}`+"\n"...)
	return b
}

// stream writes a chat completion as SSE chunks: the role, one token per
// chunk (of the content, or of the tool call's arguments after a chunk
// naming the call), the finish reason, the usage chunk if asked for, and
// [DONE].
func (s *Server) stream(c *call, model string, r *reply, prompt int, report usageReport, includeUsage, stall bool, stallFor time.Duration) int {
	n := r.tokens
	out := sseChunks{prefix: s.chunkPrefix(c, model), suffix: "}\n\n", w: c.w}
	if includeUsage {
		out.suffix = `,"usage":null}` + "\n\n"
	}
	h := c.w.Header()
	h["Content-Type"] = sseContentType
	h["Cache-Control"] = noCache
	c.w.WriteHeader(http.StatusOK)
	out.rc = *http.NewResponseController(c.w)
	ctx := c.r.Context()
	interval := c.st.interval
	out.grow(n, interval > 0)

	out.role(r)
	for i := 0; i < n; i++ {
		if stall && i == n/2 && !s.stallStream(ctx, out.send, stallFor) {
			return statusClientClosed
		}
		if interval > 0 && i > 0 {
			if !out.send() || !wait(ctx, interval) {
				return statusClientClosed
			}
		}
		out.token(r, i)
	}
	out.finish(r)
	if includeUsage && !report.none {
		out.usage(report, prompt, n)
	}
	out.b = append(out.b, "data: [DONE]\n\n"...)
	if !out.send() {
		return statusClientClosed
	}
	return http.StatusOK
}

// chunkPrefix is the opening that every chunk of a streamed completion
// of model shares: its id, time and model.
func (s *Server) chunkPrefix(c *call, model string) []byte {
	var prefix []byte
	prefix = append(prefix, `data: {"id":"chatcmpl-`...)
	prefix = c.rand.appendID(prefix, 29)
	prefix = append(prefix, `","object":"chat.completion.chunk","created":`...)
	prefix = strconv.AppendInt(prefix, s.now().Unix(), 10)
	prefix = append(prefix, `,"model":`...)
	prefix = appendJSONString(prefix, model)
	return append(prefix, `,"service_tier":"default","system_fingerprint":"fp_weirmock","choices":[`...)
}

// stallStream sends what the stream has made (send) and holds it for d;
// false if the client went away.
func (s *Server) stallStream(ctx context.Context, send func() bool, d time.Duration) bool {
	if !send() {
		return false
	}
	s.stalled.Add(1)
	if s.hooks.stalling != nil {
		s.hooks.stalling()
	}
	return wait(ctx, d)
}

// beginEvents begins c's answer as a stream of server-sent events and
// returns send, which writes the events gathered in *b to the client,
// empties *b and flushes; false: the client is gone.
func beginEvents(c *call, b *[]byte) (send func() bool) {
	h := c.w.Header()
	h["Content-Type"] = sseContentType
	h["Cache-Control"] = noCache
	c.w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(c.w)
	return func() bool {
		if _, err := c.w.Write(*b); err != nil {
			return false
		}
		*b = (*b)[:0]
		err := rc.Flush()
		return err == nil || errors.Is(err, http.ErrNotSupported)
	}
}

// sseChunks makes a streamed chat completion's chunks, each with the
// opening (prefix) and the closing (suffix) that all share, and sends
// them to w.
type sseChunks struct {
	prefix []byte
	suffix string
	// b collects chunks until they are sent: all at once when unpaced,
	// each as it is made when paced, and before a stall.
	b []byte
	w http.ResponseWriter
	// rc is held by value: a pointer in the struct would escape with b
	// and cost the stream an allocation.
	rc http.ResponseController
}

// grow makes room in b for the chunks sent at once: the n tokens' and
// the three around them, or two when paced.
func (o *sseChunks) grow(n int, paced bool) {
	chunks := n + 3
	if paced {
		chunks = 2
	}
	o.b = make([]byte, 0, min(1<<20, 256+chunks*(len(o.prefix)+64)))
}

// send writes the chunks made so far and flushes them; false if the
// client went away.
func (o *sseChunks) send() bool {
	if _, err := o.w.Write(o.b); err != nil {
		return false
	}
	o.b = o.b[:0]
	// A writer that cannot flush (a wrapper without Unwrap) still
	// gets the whole stream, only later.
	err := o.rc.Flush()
	return err == nil || errors.Is(err, http.ErrNotSupported)
}

// openChunk begins a chunk, up to its delta.
func (o *sseChunks) openChunk() {
	o.b = append(o.b, o.prefix...)
	o.b = append(o.b, `{"index":0,"delta":`...)
}

// closeChunk ends a chunk with its finish reason, as JSON.
func (o *sseChunks) closeChunk(finish string) {
	o.b = append(o.b, `,"logprobs":null,"finish_reason":`...)
	o.b = append(o.b, finish...)
	o.b = append(o.b, "}]"...)
	o.b = append(o.b, o.suffix...)
}

// role makes the first chunk: the assistant's role, and the tool call's
// name if r calls one.
func (o *sseChunks) role(r *reply) {
	o.openChunk()
	if r.tool == "" {
		o.b = append(o.b, `{"role":"assistant","content":"","refusal":null}`...)
	} else {
		o.b = append(o.b, `{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"`...)
		o.b = append(o.b, r.callID...)
		o.b = append(o.b, `","type":"function","function":{"name":`...)
		o.b = appendJSONString(o.b, r.tool)
		o.b = append(o.b, `,"arguments":""}}],"refusal":null}`...)
	}
	o.closeChunk("null")
}

// token makes the chunk of r's token i: content, or the tool call's
// arguments.
func (o *sseChunks) token(r *reply, i int) {
	o.openChunk()
	if r.tool == "" {
		o.b = append(o.b, `{"content":"`...)
		o.b = r.appendTokens(o.b, i, i+1)
		o.b = append(o.b, `"}`...)
	} else {
		o.b = append(o.b, `{"tool_calls":[{"index":0,"function":{"arguments":"`...)
		o.b = r.appendTokens(o.b, i, i+1)
		o.b = append(o.b, `"}}]}`...)
	}
	o.closeChunk("null")
}

// finish makes the last chunk of a choice: no delta, and r's finish
// reason.
func (o *sseChunks) finish(r *reply) {
	o.openChunk()
	o.b = append(o.b, "{}"...)
	o.closeChunk(r.finish)
}

// usage makes the usage chunk: no choices, and the tokens counted.
func (o *sseChunks) usage(report usageReport, prompt, completion int) {
	o.b = append(o.b, o.prefix...)
	o.b = append(o.b, `],"usage":`...)
	o.b = appendUsage(o.b, report, prompt, completion)
	o.b = append(o.b, "}\n\n"...)
}

// appendUsage appends the usage of an answer that counted prompt and
// completion tokens, as report has it reported.
func appendUsage(b []byte, report usageReport, prompt, completion int) []byte {
	prompt, completion, cached := report.counts(prompt, completion)
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt+completion), 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(cached), 10)
	return append(b, `,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`...)
}

// estimateTokens is the mock's tokenizer: about four bytes a token.
func estimateTokens(nbytes int) int { return (nbytes + 3) / 4 }

// promptTokens estimates a chat prompt: 3 tokens a message plus 3 to
// prime the answer (OpenAI's own accounting), the text by its length, 85
// tokens an image.
func promptTokens(msgs []chatMessage) int {
	total := 3
	for _, m := range msgs {
		total += 3
		raw := m.Content
		switch {
		case len(raw) >= 2 && raw[0] == '"':
			total += estimateTokens(len(raw) - 2)
		case len(raw) > 0 && raw[0] == '[':
			var parts []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if json.Unmarshal(raw, &parts) != nil {
				total += estimateTokens(len(raw))
				continue
			}
			for _, p := range parts {
				if p.Type == "image_url" || p.Type == "input_image" {
					total += 85
				} else {
					total += estimateTokens(len(p.Text))
				}
			}
		}
	}
	return total
}

// appendJSONString appends s as a JSON string; names from requests are
// almost always plain ASCII, which is copied as it is.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			q, _ := json.Marshal(s) // a string: cannot fail
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
