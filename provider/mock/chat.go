package mock

import (
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
	if status := s.begin(c, req.Model, o); status != 0 {
		return status
	}
	if !req.Stream {
		// A non-streamed answer comes when the whole generation would have.
		if !wait(c.r.Context(), time.Duration(r.tokens)*c.st.interval) {
			return statusClientClosed
		}
		b := make([]byte, 0, 640+len(req.Model)+len(r.tool)+textLen(r.tokens)+len(js)*2)
		b = append(b, `{"id":"chatcmpl-`...)
		b = c.rand.appendID(b, 29)
		b = append(b, `","object":"chat.completion","created":`...)
		b = strconv.AppendInt(b, s.now().Unix(), 10)
		b = append(b, `,"model":`...)
		b = appendJSONString(b, req.Model)
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
		b = append(b, `}],"usage":`...)
		b = appendUsage(b, prompt, r.tokens)
		b = append(b, `,"service_tier":"default","system_fingerprint":"fp_weirmock"}`+"\n"...)
		writeJSON(c.w, b)
		return http.StatusOK
	}

	stall := o.stall == 1 || (o.stall == 0 && c.rand.chance(c.st.cfg.StallRate))
	stallFor := c.st.cfg.StallFor
	if o.stallFor > 0 {
		stallFor = o.stallFor
	}
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	return s.stream(c, req.Model, &r, prompt, includeUsage, stall, stallFor)
}

// stream writes a chat completion as SSE chunks: the role, one token per
// chunk (of the content, or of the tool call's arguments after a chunk
// naming the call), the finish reason, the usage chunk if asked for, and
// [DONE].
func (s *Server) stream(c *call, model string, r *reply, prompt int, includeUsage, stall bool, stallFor time.Duration) int {
	n := r.tokens
	// Every chunk shares its opening and its closing.
	var prefix []byte
	prefix = append(prefix, `data: {"id":"chatcmpl-`...)
	prefix = c.rand.appendID(prefix, 29)
	prefix = append(prefix, `","object":"chat.completion.chunk","created":`...)
	prefix = strconv.AppendInt(prefix, s.now().Unix(), 10)
	prefix = append(prefix, `,"model":`...)
	prefix = appendJSONString(prefix, model)
	prefix = append(prefix, `,"service_tier":"default","system_fingerprint":"fp_weirmock","choices":[`...)
	suffix := "}\n\n"
	if includeUsage {
		suffix = `,"usage":null}` + "\n\n"
	}
	open := func(b []byte) []byte {
		b = append(b, prefix...)
		return append(b, `{"index":0,"delta":`...)
	}
	closeWith := func(b []byte, finish string) []byte {
		b = append(b, `,"logprobs":null,"finish_reason":`...)
		b = append(b, finish...)
		b = append(b, "}]"...)
		return append(b, suffix...)
	}

	h := c.w.Header()
	h["Content-Type"] = sseContentType
	h["Cache-Control"] = noCache
	c.w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(c.w)
	ctx := c.r.Context()
	interval := c.st.interval

	// b collects chunks until they are sent: all at once when unpaced,
	// each as it is made when paced, and before a stall.
	chunks := n + 3
	if interval > 0 {
		chunks = 2
	}
	b := make([]byte, 0, min(1<<20, 256+chunks*(len(prefix)+64)))
	send := func() bool {
		if _, err := c.w.Write(b); err != nil {
			return false
		}
		b = b[:0]
		// A writer that cannot flush (a wrapper without Unwrap) still
		// gets the whole stream, only later.
		err := rc.Flush()
		return err == nil || errors.Is(err, http.ErrNotSupported)
	}
	b = open(b)
	if r.tool == "" {
		b = append(b, `{"role":"assistant","content":"","refusal":null}`...)
	} else {
		b = append(b, `{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"`...)
		b = append(b, r.callID...)
		b = append(b, `","type":"function","function":{"name":`...)
		b = appendJSONString(b, r.tool)
		b = append(b, `,"arguments":""}}],"refusal":null}`...)
	}
	b = closeWith(b, "null")
	for i := 0; i < n; i++ {
		if stall && i == n/2 {
			if !send() {
				return statusClientClosed
			}
			s.stalled.Add(1)
			if s.hooks.stalling != nil {
				s.hooks.stalling()
			}
			if !wait(ctx, stallFor) {
				return statusClientClosed
			}
		}
		if interval > 0 && i > 0 {
			if !send() || !wait(ctx, interval) {
				return statusClientClosed
			}
		}
		b = open(b)
		if r.tool == "" {
			b = append(b, `{"content":"`...)
			b = r.appendTokens(b, i, i+1)
			b = append(b, `"}`...)
		} else {
			b = append(b, `{"tool_calls":[{"index":0,"function":{"arguments":"`...)
			b = r.appendTokens(b, i, i+1)
			b = append(b, `"}}]}`...)
		}
		b = closeWith(b, "null")
	}
	b = open(b)
	b = append(b, "{}"...)
	b = closeWith(b, r.finish)
	if includeUsage {
		b = append(b, prefix...)
		b = append(b, `],"usage":`...)
		b = appendUsage(b, prompt, n)
		b = append(b, "}\n\n"...)
	}
	b = append(b, "data: [DONE]\n\n"...)
	if !send() {
		return statusClientClosed
	}
	return http.StatusOK
}

func appendUsage(b []byte, prompt, completion int) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt+completion), 10)
	return append(b, `,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`...)
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
