package mock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Anthropic's Messages API: POST /v1/messages and
// /v1/messages/count_tokens, with Anthropic's shapes, events and errors.
// The mock writes them itself, from the API's reference, rather than from
// Weir's own translation, so that tests of the one check the other.

type messagesRequest struct {
	Model      string             `json:"model"`
	MaxTokens  *int               `json:"max_tokens"`
	System     json.RawMessage    `json:"system"`
	Messages   []anthropicTurn    `json:"messages"`
	Stream     bool               `json:"stream"`
	Tools      []anthropicTool    `json:"tools"`
	ToolChoice *anthropicChoice   `json:"tool_choice"`
	Metadata   map[string]string  `json:"metadata"`
	Thinking   *anthropicThinking `json:"thinking"`
}

// anthropicThinking is extended thinking's configuration: "enabled",
// with a budget of at least 1024 tokens and under max_tokens, or
// "disabled".
type anthropicThinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

// The mock's thinking, when a request asks for it: a thinking block
// before the answer, its text in mockThinkingTokens deltas, signed.
const (
	mockThinking       = "The user wants an answer. Let me think it over."
	mockThinkingTokens = 4
	mockSignature      = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
)

type anthropicTurn struct {
	Role string `json:"role"`
	// Content is a string or blocks; kept raw, as only its length and
	// its block types are looked at.
	Content json.RawMessage `json:"content"`
}

type anthropicTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type anthropicChoice struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

// anthropicBlock is what the mock reads of a content block.
type anthropicBlock struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Input   json.RawMessage `json:"input"`
	Content json.RawMessage `json:"content"`
}

// parseMessages reads and checks a Messages request; needMax: max_tokens
// is required (POST /v1/messages; count_tokens takes none).
func (c *call) parseMessages(needMax bool) (*messagesRequest, *apiError) {
	if c.r.Header.Get("Anthropic-Version") == "" {
		e := invalidRequest("", "anthropic-version: header is required")
		return nil, &e
	}
	var req messagesRequest
	if err := json.Unmarshal(c.body, &req); err != nil {
		e := invalidRequest("", "There was an issue with the JSON body of your request: "+err.Error())
		return nil, &e
	}
	switch {
	case req.Model == "":
		e := invalidRequest("model", "model: Field required")
		return nil, &e
	case needMax && req.MaxTokens == nil:
		e := invalidRequest("max_tokens", "max_tokens: Field required")
		return nil, &e
	case needMax && *req.MaxTokens < 1:
		e := invalidRequest("max_tokens", "max_tokens: Input should be greater than or equal to 1")
		return nil, &e
	case len(req.Messages) == 0:
		e := invalidRequest("messages", "messages: at least one message is required")
		return nil, &e
	}
	if t := req.Thinking; t != nil {
		switch {
		case t.Type == "disabled":
		case t.Type != "enabled":
			e := invalidRequest("thinking", "thinking.type: Input should be 'enabled' or 'disabled'")
			return nil, &e
		case t.BudgetTokens < 1024:
			e := invalidRequest("thinking", "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
			return nil, &e
		case needMax && t.BudgetTokens >= *req.MaxTokens:
			e := invalidRequest("thinking", "`max_tokens` must be greater than `thinking.budget_tokens`")
			return nil, &e
		}
	}
	for i, m := range req.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			e := invalidRequest("messages", fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant'", i))
			return nil, &e
		}
		if _, err := turnBlocks(m.Content); err != nil {
			e := invalidRequest("messages", fmt.Sprintf("messages.%d.content: %v", i, err))
			return nil, &e
		}
	}
	return &req, nil
}

// turnBlocks is a turn's content as blocks (a string is one text block).
func turnBlocks(raw json.RawMessage) ([]anthropicBlock, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []anthropicBlock{{Type: "text", Text: s}}, nil
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, fmt.Errorf("Input should be a valid string or list of content blocks")
	}
	return blocks, nil
}

// anthropicImageTokens is what the mock counts an image.
const anthropicImageTokens = 1600

// inputTokens estimates a Messages prompt as the mock does a chat one: 3
// tokens a turn, text by its length, a flat count an image.
func (req *messagesRequest) inputTokens() int {
	total := 3
	var count func(blocks []anthropicBlock)
	count = func(blocks []anthropicBlock) {
		for _, b := range blocks {
			switch b.Type {
			case "image", "document":
				total += anthropicImageTokens
			case "tool_result":
				if inner, err := turnBlocks(b.Content); err == nil {
					count(inner)
				}
			default:
				total += estimateTokens(len(b.Text) + len(b.Input))
			}
		}
	}
	if len(req.System) > 0 && string(req.System) != "null" {
		if sys, err := turnBlocks(req.System); err == nil {
			count(sys)
		}
	}
	for _, m := range req.Messages {
		total += 3
		blocks, _ := turnBlocks(m.Content)
		count(blocks)
	}
	for _, t := range req.Tools {
		total += 10 + estimateTokens(len(t.Name)+len(t.InputSchema))
	}
	return total
}

// calledTool is the tool the answer calls, or nil for a text answer: the
// one tool_choice names, the first with "any", and with "auto" (or none)
// the first unless the conversation's last turn answers a call already,
// so that a client's tool loop ends.
func (req *messagesRequest) calledTool() (*anthropicTool, *apiError) {
	choice := "auto"
	if req.ToolChoice != nil {
		choice = req.ToolChoice.Type
	}
	switch choice {
	case "none":
		return nil, nil
	case "auto", "any", "tool":
	default:
		e := invalidRequest("tool_choice", "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'")
		return nil, &e
	}
	if len(req.Tools) == 0 {
		if choice == "any" || choice == "tool" {
			e := invalidRequest("tool_choice", "tool_choice may only be specified while providing tools.")
			return nil, &e
		}
		return nil, nil
	}
	if choice == "tool" {
		for i := range req.Tools {
			if req.Tools[i].Name == req.ToolChoice.Name {
				return &req.Tools[i], nil
			}
		}
		e := invalidRequest("tool_choice", "Tool '"+req.ToolChoice.Name+"' not found in tools.")
		return nil, &e
	}
	if choice == "auto" {
		last := req.Messages[len(req.Messages)-1]
		blocks, _ := turnBlocks(last.Content)
		for _, b := range blocks {
			if b.Type == "tool_result" {
				return nil, nil
			}
		}
	}
	return &req.Tools[0], nil
}

// countTokens serves POST /v1/messages/count_tokens.
func (s *Server) countTokens(c *call) int {
	req, apiErr := c.parseMessages(false)
	if apiErr != nil {
		return c.fail(*apiErr)
	}
	b := append([]byte(`{"input_tokens":`), strconv.Itoa(req.inputTokens())...)
	writeJSON(c.w, append(b, "}\n"...))
	return http.StatusOK
}

// messages serves POST /v1/messages.
func (s *Server) messages(c *call) int {
	req, apiErr := c.parseMessages(true)
	if apiErr != nil {
		return c.fail(*apiErr)
	}
	o, err := parseOverrides(c.r.Header)
	if err != nil {
		return c.fail(invalidRequest("", err.Error()))
	}
	tool, apiErr := req.calledTool()
	if apiErr != nil {
		return c.fail(*apiErr)
	}
	n := c.st.cfg.CompletionTokens
	if o.tokens > 0 {
		n = o.tokens
	}
	r := reply{tokens: n, finish: "end_turn", text: newTextAnswer(n)}
	thinks := req.Thinking != nil && req.Thinking.Type == "enabled"
	if tool != nil {
		ct := chatTool{Type: "function"}
		ct.Function.Name, ct.Function.Parameters = tool.Name, tool.InputSchema
		js, apiErr := structuredJSON(nil, &ct, r.text, s.now)
		if apiErr != nil {
			apiErr.Param = "tools"
			return c.fail(*apiErr)
		}
		r.pieces = jsonTokens(js)
		r.tokens, r.tool, r.finish = len(r.pieces), tool.Name, "tool_use"
		r.callID = c.rand.appendID([]byte("toolu_"), 24)
	}
	if *req.MaxTokens < r.tokens {
		r.tokens, r.finish = *req.MaxTokens, "max_tokens"
	}
	output := r.tokens
	if thinks {
		output += mockThinkingTokens
	}
	input := req.inputTokens()
	if status := s.begin(c, req.Model, o); status != 0 {
		return status
	}
	id := c.rand.appendID([]byte("msg_"), 24)
	if !req.Stream {
		if !wait(c.r.Context(), time.Duration(r.tokens)*c.st.interval) {
			return statusClientClosed
		}
		b := make([]byte, 0, 512+len(req.Model)+textLen(r.tokens)+len(r.pieces)*8)
		b = append(b, `{"id":"`...)
		b = append(b, id...)
		b = append(b, `","type":"message","role":"assistant","model":`...)
		b = appendJSONString(b, req.Model)
		b = append(b, `,"content":[`...)
		if thinks {
			b = append(b, `{"type":"thinking","thinking":"`+mockThinking+`","signature":"`+mockSignature+`"},`...)
		}
		if r.tool == "" {
			b = append(b, `{"type":"text","text":"`...)
			b = r.appendTokens(b, 0, r.tokens)
			b = append(b, `"}`...)
		} else {
			b = append(b, `{"type":"tool_use","id":"`...)
			b = append(b, r.callID...)
			b = append(b, `","name":`...)
			b = appendJSONString(b, r.tool)
			b = append(b, `,"input":`...)
			b = appendToolInput(b, &r)
			b = append(b, '}')
		}
		b = append(b, `],"stop_reason":"`...)
		b = append(b, r.finish...)
		b = append(b, `","stop_sequence":null,"usage":`...)
		b = appendAnthropicUsage(b, input, output)
		b = append(b, "}\n"...)
		writeJSON(c.w, b)
		return http.StatusOK
	}
	stall := o.stall == 1 || (o.stall == 0 && c.rand.chance(c.st.cfg.StallRate))
	stallFor := c.st.cfg.StallFor
	if o.stallFor > 0 {
		stallFor = o.stallFor
	}
	return s.streamMessage(c, req.Model, id, &r, input, thinks, stall, stallFor, o.streamError)
}

// appendToolInput appends a tool_use's input: the call's JSON, or, cut
// short by max_tokens, an empty object (its JSON would not parse).
func appendToolInput(b []byte, r *reply) []byte {
	if r.tokens < len(r.pieces) {
		return append(b, "{}"...)
	}
	for _, p := range r.pieces {
		b = append(b, p...)
	}
	return b
}

func appendAnthropicUsage(b []byte, input, output int) []byte {
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(input), 10)
	b = append(b, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(output), 10)
	return append(b, '}')
}

// streamMessage writes a message as Anthropic's events: message_start,
// (thinks: a thinking block, its thinking_delta events and its
// signature_delta,) the content block's start, a ping, a delta a token
// (text_delta, or input_json_delta for a tool call), the block's stop,
// message_delta with the stop reason and the output tokens, message_stop.
// failWith, if set, is an error type: the stream ends after half its
// tokens with an error event of that type instead, as Anthropic ends a
// stream that fails once it has begun (overloaded_error, say).
func (s *Server) streamMessage(c *call, model string, id []byte, r *reply, input int, thinks, stall bool, stallFor time.Duration, failWith string) int {
	ctx := c.r.Context()
	interval := c.st.interval
	b := make([]byte, 0, 1024+r.tokens*96)
	send := beginEvents(c, &b)
	event := func(name string) {
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, "\ndata: "...)
	}
	event("message_start")
	b = append(b, `{"type":"message_start","message":{"id":"`...)
	b = append(b, id...)
	b = append(b, `","type":"message","role":"assistant","model":`...)
	b = appendJSONString(b, model)
	b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":`...)
	b = appendAnthropicUsage(b, input, 1)
	b = append(b, "}}\n\n"...)
	index, output := 0, r.tokens
	if thinks {
		output += mockThinkingTokens
		event("content_block_start")
		b = append(b, `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`+"\n\n"...)
		words := bytes.SplitAfter([]byte(mockThinking), []byte(" "))
		per := (len(words) + mockThinkingTokens - 1) / mockThinkingTokens
		for i := 0; i < len(words); i += per {
			event("content_block_delta")
			b = append(b, `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"`...)
			b = append(b, bytes.Join(words[i:min(i+per, len(words))], nil)...)
			b = append(b, `"}}`+"\n\n"...)
		}
		event("content_block_delta")
		b = append(b, `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"`+mockSignature+`"}}`+"\n\n"...)
		event("content_block_stop")
		b = append(b, `{"type":"content_block_stop","index":0}`+"\n\n"...)
		index = 1
	}
	idx := strconv.Itoa(index)
	event("content_block_start")
	if r.tool == "" {
		b = append(b, `{"type":"content_block_start","index":`+idx+`,"content_block":{"type":"text","text":""}}`+"\n\n"...)
	} else {
		b = append(b, `{"type":"content_block_start","index":`+idx+`,"content_block":{"type":"tool_use","id":"`...)
		b = append(b, r.callID...)
		b = append(b, `","name":`...)
		b = appendJSONString(b, r.tool)
		b = append(b, `,"input":{}}}`+"\n\n"...)
	}
	event("ping")
	b = append(b, `{"type": "ping"}`+"\n\n"...)
	for i := 0; i < r.tokens; i++ {
		if stall && i == r.tokens/2 {
			if !s.stallStream(ctx, send, stallFor) {
				return statusClientClosed
			}
		}
		if interval > 0 && i > 0 {
			if !send() || !wait(ctx, interval) {
				return statusClientClosed
			}
		}
		if failWith != "" && i == r.tokens/2 {
			event("error")
			b = appendAnthropicErrorEvent(b, failWith)
			if !send() {
				return statusClientClosed
			}
			return http.StatusOK
		}
		event("content_block_delta")
		if r.tool == "" {
			b = append(b, `{"type":"content_block_delta","index":`+idx+`,"delta":{"type":"text_delta","text":"`...)
		} else {
			b = append(b, `{"type":"content_block_delta","index":`+idx+`,"delta":{"type":"input_json_delta","partial_json":"`...)
		}
		b = r.appendTokens(b, i, i+1)
		b = append(b, `"}}`+"\n\n"...)
	}
	event("content_block_stop")
	b = append(b, `{"type":"content_block_stop","index":`+idx+`}`+"\n\n"...)
	event("message_delta")
	b = append(b, `{"type":"message_delta","delta":{"stop_reason":"`...)
	b = append(b, r.finish...)
	b = append(b, `","stop_sequence":null},"usage":{"output_tokens":`...)
	b = strconv.AppendInt(b, int64(output), 10)
	b = append(b, "}}\n\n"...)
	event("message_stop")
	b = append(b, `{"type":"message_stop"}`+"\n\n"...)
	if !send() {
		return statusClientClosed
	}
	return http.StatusOK
}

// anthropicErrorType is Anthropic's error type for status.
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	case statusOverloaded:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// appendAnthropicErrorEvent appends an error event's data: Anthropic's
// error shape, of type typ.
func appendAnthropicErrorEvent(b []byte, typ string) []byte {
	b = append(b, `{"type":"error","error":{"type":`...)
	b = appendJSONString(b, typ)
	b = append(b, `,"message":`...)
	b = appendJSONString(b, "the mock failed the stream with "+typ)
	return append(b, "}}\n\n"...)
}

// statusOverloaded is Anthropic's status for an overloaded API.
const statusOverloaded = 529

// writeAnthropicError writes e in Anthropic's shape,
// {"type": "error", "error": {"type", "message"}, "request_id"}. A 429
// carries retry-after (whole seconds, at least 1) and the
// anthropic-ratelimit-requests-* headers of an exhausted limit that
// resets after retryAfter from now; a 529 carries none, as an overload
// says nothing of when it passes.
func writeAnthropicError(w http.ResponseWriter, e apiError, retryAfter time.Duration, now time.Time) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	if e.Status == http.StatusTooManyRequests {
		secs := max(int64((retryAfter+time.Second-1)/time.Second), 1)
		h["Retry-After"] = []string{strconv.FormatInt(secs, 10)}
		h["Anthropic-Ratelimit-Requests-Limit"] = []string{"50"}
		h["Anthropic-Ratelimit-Requests-Remaining"] = []string{"0"}
		h["Anthropic-Ratelimit-Requests-Reset"] = []string{now.Add(retryAfter).UTC().Format(time.RFC3339)}
	}
	var body struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
		RequestID string `json:"request_id,omitempty"`
	}
	body.Type = "error"
	body.Error.Type, body.Error.Message = anthropicErrorType(e.Status), e.Message
	if id := h["X-Request-Id"]; len(id) > 0 {
		body.RequestID = id[0]
	}
	b, _ := json.Marshal(body) // strings: cannot fail
	w.WriteHeader(e.Status)
	w.Write(append(b, '\n'))
}
