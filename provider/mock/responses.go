package mock

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// OpenAI's Responses API: POST /v1/responses, answered with a response
// object or, streamed, its typed events (each with its sequence_number,
// no [DONE]), written from the API's reference rather than from Weir's
// own translation so that tests of the one check the other. A response
// is kept unless the request says store: false, so that it can be
// retrieved (GET /v1/responses/{id}), deleted, listed for its input items
// and continued (previous_response_id); a previous_response_id the mock
// does not hold is answered 404, as OpenAI answers one another account
// made. Latency, errors, tokens, pacing and stalls are the chat
// endpoint's.

type responsesRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       *string           `json:"instructions"`
	Tools              []responsesTool   `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Stream             bool              `json:"stream"`
	Store              *bool             `json:"store"`
	Background         bool              `json:"background"`
	PreviousResponseID string            `json:"previous_response_id"`
	Metadata           map[string]string `json:"metadata"`
	Text               *struct {
		Format *struct {
			Type   string          `json:"type"`
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"text"`
}

// responsesTool is one of a request's tools: a function, or a built-in
// tool the mock takes and never calls.
type responsesTool struct {
	Type       string          `json:"type"`
	Name       string          `json:"name"`
	Parameters json.RawMessage `json:"parameters"`
}

// responseObject is a response as the API answers it.
type responseObject struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	Status             string            `json:"status"`
	Background         bool              `json:"background"`
	Error              any               `json:"error"`
	IncompleteDetails  *incompleteReason `json:"incomplete_details"`
	Instructions       *string           `json:"instructions"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Model              string            `json:"model"`
	Output             []outputItem      `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Store              bool              `json:"store"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	Tools              []json.RawMessage `json:"tools"`
	Truncation         string            `json:"truncation"`
	Usage              *responsesUsage   `json:"usage"`
	Metadata           map[string]string `json:"metadata"`
}

type incompleteReason struct {
	Reason string `json:"reason"`
}

// outputItem is a message of output_text, or a function_call.
type outputItem struct {
	Type      string        `json:"type"`
	ID        string        `json:"id"`
	Status    string        `json:"status"`
	Role      string        `json:"role,omitempty"`
	Content   *[]outputText `json:"content,omitempty"`
	CallID    string        `json:"call_id,omitempty"`
	Name      string        `json:"name,omitempty"`
	Arguments *string       `json:"arguments,omitempty"`
}

type outputText struct {
	Type        string `json:"type"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
	Text        string `json:"text"`
}

type responsesUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

// storedResponse is a response kept for later calls, and its input.
type storedResponse struct {
	resp  []byte // the response object, as answered
	input []json.RawMessage
}

// responseStore holds the responses kept, by id.
type responseStore struct {
	mu   sync.Mutex
	byID map[string]storedResponse
}

func (rs *responseStore) get(id string) (storedResponse, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r, ok := rs.byID[id]
	return r, ok
}

func (rs *responseStore) put(id string, r storedResponse) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.byID == nil {
		rs.byID = make(map[string]storedResponse)
	}
	rs.byID[id] = r
}

func (rs *responseStore) remove(id string) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	_, ok := rs.byID[id]
	delete(rs.byID, id)
	return ok
}

// inputItems is a request's input as items: a string is one user
// message.
func inputItems(raw json.RawMessage) ([]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		b, _ := json.Marshal(map[string]any{"type": "message", "role": "user", "content": []any{map[string]string{"type": "input_text", "text": s}}})
		return []json.RawMessage{b}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, errors.New("Invalid 'input': expected a string or an array of input items")
	}
	return items, nil
}

// chatTools are a request's function tools as chat tools, for
// forcedTool, and its tool_choice in chat's shape.
func (req *responsesRequest) chatTools() ([]chatTool, json.RawMessage) {
	var tools []chatTool
	for _, t := range req.Tools {
		if t.Type != "function" {
			continue
		}
		ct := chatTool{Type: "function"}
		ct.Function.Name, ct.Function.Parameters = t.Name, t.Parameters
		tools = append(tools, ct)
	}
	choice := req.ToolChoice
	var named struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if len(choice) > 0 && choice[0] == '{' && json.Unmarshal(choice, &named) == nil {
		if named.Type != "function" {
			return tools, nil // a built-in tool: the mock answers in text
		}
		choice, _ = json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": named.Name}})
	}
	return tools, choice
}

// createResponse serves POST /v1/responses.
func (s *Server) createResponse(c *call) int {
	var req responsesRequest
	if err := json.Unmarshal(c.body, &req); err != nil {
		return c.fail(invalidRequest("", "We could not parse the JSON body of your request: "+err.Error()))
	}
	o, err := parseOverrides(c.r.Header)
	if err != nil {
		return c.fail(invalidRequest("", err.Error()))
	}
	if len(req.Input) == 0 || string(req.Input) == "null" {
		return c.fail(invalidRequest("input", "Missing required parameter: 'input'."))
	}
	input, err := inputItems(req.Input)
	if err != nil {
		return c.fail(invalidRequest("input", err.Error()))
	}
	if req.PreviousResponseID != "" {
		if _, ok := s.responses.get(req.PreviousResponseID); !ok {
			e := invalidRequest("previous_response_id", "Previous response with id '"+req.PreviousResponseID+"' not found.")
			e.Status, e.Code = http.StatusNotFound, "previous_response_not_found"
			return c.fail(e)
		}
	}
	n := c.st.cfg.CompletionTokens
	if o.tokens > 0 {
		n = o.tokens
	}
	r := reply{tokens: n, text: newTextAnswer(n)}
	tools, choice := req.chatTools()
	tool, apiErr := forcedTool(choice, tools)
	if apiErr != nil {
		return c.fail(*apiErr)
	}
	js, apiErr := structuredJSON(req.chatFormat(), tool, r.text, s.now)
	if apiErr != nil {
		return c.fail(*apiErr)
	}
	if js != nil {
		r.pieces = jsonTokens(js)
		r.tokens = len(r.pieces)
	}
	if tool != nil {
		r.tool = tool.Function.Name
		r.callID = c.rand.appendID([]byte("call_"), 24)
	}
	status := "completed"
	if req.MaxOutputTokens != nil {
		if *req.MaxOutputTokens < 16 {
			return c.fail(invalidRequest("max_output_tokens", "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got "+strconv.Itoa(*req.MaxOutputTokens)+" instead."))
		}
		if *req.MaxOutputTokens < r.tokens {
			r.tokens, status = *req.MaxOutputTokens, "incomplete"
		}
	}
	inputTokens := 3 + estimateTokens(len(req.Input))
	if req.Instructions != nil {
		inputTokens += estimateTokens(len(*req.Instructions))
	}
	if st := s.begin(c, req.Model, o); st != 0 {
		return st
	}
	resp := s.newResponse(c, &req, &r, status)
	full := resp.Output
	resp.Status, resp.Output = "in_progress", []outputItem{}
	resp.IncompleteDetails, resp.Usage = nil, nil
	start, _ := json.Marshal(resp) // plain values: cannot fail
	resp.Status, resp.Output = status, full
	if status == "incomplete" {
		resp.IncompleteDetails = &incompleteReason{Reason: "max_output_tokens"}
	}
	resp.Usage = &responsesUsage{InputTokens: int64(inputTokens), OutputTokens: int64(r.tokens), TotalTokens: int64(inputTokens + r.tokens)}
	final, _ := json.Marshal(resp) // plain values: cannot fail
	kept := final
	var failed []byte
	if req.Stream && o.streamError != "" {
		failed = failedResponse(*resp, o.streamError)
		kept = failed
	}
	if resp.Store {
		s.responses.put(resp.ID, storedResponse{resp: kept, input: input})
	}
	if !req.Stream {
		if !wait(c.r.Context(), time.Duration(r.tokens)*c.st.interval) {
			return statusClientClosed
		}
		writeJSON(c.w, append(final, '\n'))
		return http.StatusOK
	}
	stall := o.stall == 1 || (o.stall == 0 && c.rand.chance(c.st.cfg.StallRate))
	stallFor := c.st.cfg.StallFor
	if o.stallFor > 0 {
		stallFor = o.stallFor
	}
	return s.streamResponse(c, &r, resp, start, final, failed, stall, stallFor)
}

// chatFormat is the request's text.format as Chat Completions'
// response_format; nil for plain text.
func (req *responsesRequest) chatFormat() *responseFormat {
	if req.Text == nil || req.Text.Format == nil || req.Text.Format.Type == "text" {
		return nil
	}
	rf := &responseFormat{Type: req.Text.Format.Type}
	if rf.Type == "json_schema" {
		rf.JSONSchema = &struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		}{Name: req.Text.Format.Name, Schema: req.Text.Format.Schema}
	}
	return rf
}

// failedResponse is resp failed with an error of code, as response.failed
// carries it: no output, no usage.
func failedResponse(resp responseObject, code string) []byte {
	resp.Status, resp.Output, resp.Usage, resp.IncompleteDetails = "failed", []outputItem{}, nil, nil
	resp.Error = map[string]string{"code": code, "message": "the mock failed the response with " + code}
	b, _ := json.Marshal(resp) // plain values: cannot fail
	return b
}

// plain is r's tokens [from, to) as a string, not a JSON string's
// inside.
func (r *reply) plain(from, to int) string {
	q := append([]byte{'"'}, r.appendTokens(nil, from, to)...)
	var s string
	_ = json.Unmarshal(append(q, '"'), &s) // appendTokens escapes what JSON must
	return s
}

// newResponse is the response to req, its output r: a message, or a
// function call.
func (s *Server) newResponse(c *call, req *responsesRequest, r *reply, status string) *responseObject {
	resp := &responseObject{
		Object: "response", CreatedAt: s.now().Unix(), Status: status, Background: req.Background,
		Instructions: req.Instructions, MaxOutputTokens: req.MaxOutputTokens, Model: req.Model,
		ParallelToolCalls: true, Store: req.Store == nil || *req.Store, ToolChoice: req.ToolChoice,
		Tools: []json.RawMessage{}, Truncation: "disabled", Metadata: req.Metadata,
	}
	resp.ID = string(c.rand.appendID([]byte("resp_"), 48))
	if req.PreviousResponseID != "" {
		resp.PreviousResponseID = &req.PreviousResponseID
	}
	if len(resp.ToolChoice) == 0 {
		resp.ToolChoice = json.RawMessage(`"auto"`)
	}
	if resp.Metadata == nil {
		resp.Metadata = map[string]string{}
	}
	for _, t := range req.Tools {
		b, _ := json.Marshal(t) // plain values: cannot fail
		resp.Tools = append(resp.Tools, b)
	}
	text := r.plain(0, r.tokens)
	if r.tool != "" {
		resp.Output = []outputItem{{Type: "function_call", ID: string(c.rand.appendID([]byte("fc_"), 48)), Status: status,
			CallID: string(r.callID), Name: r.tool, Arguments: &text}}
		return resp
	}
	content := []outputText{{Type: "output_text", Annotations: []any{}, Logprobs: []any{}, Text: text}}
	resp.Output = []outputItem{{Type: "message", ID: string(c.rand.appendID([]byte("msg_"), 48)), Status: status,
		Role: "assistant", Content: &content}}
	return resp
}

// streamResponse writes a response as the Responses API's events:
// response.created and response.in_progress (start is the response as it
// begins), the output item added, for a message its content part added,
// a delta a token (response.output_text.delta, or
// response.function_call_arguments.delta for a call), the text or the
// arguments done, the part and the item done, and response.completed
// (response.incomplete when max_output_tokens cut it short) with final,
// its usage in it. failed, if set, is the response failed: the stream
// ends after half its tokens with response.failed carrying it instead,
// as the API ends a response that fails once it has begun.
func (s *Server) streamResponse(c *call, r *reply, resp *responseObject, start, final, failed []byte, stall bool, stallFor time.Duration) int {
	ctx := c.r.Context()
	interval := c.st.interval
	b := make([]byte, 0, 4096+r.tokens*160)
	send := beginEvents(c, &b)
	seq := 0
	// event writes one event: its name, and its data, fields the JSON
	// object's members after type and sequence_number.
	event := func(name string, fields ...any) {
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, "\ndata: {\"type\":\""...)
		b = append(b, name...)
		b = append(b, `","sequence_number":`...)
		b = strconv.AppendInt(b, int64(seq), 10)
		for i := 0; i+1 < len(fields); i += 2 {
			b = append(b, ',')
			b = appendJSONString(b, fields[i].(string))
			b = append(b, ':')
			v, _ := json.Marshal(fields[i+1]) // plain values: cannot fail
			b = append(b, v...)
		}
		b = append(b, "}\n\n"...)
		seq++
	}
	raw := func(v []byte) json.RawMessage { return json.RawMessage(v) }
	event("response.created", "response", raw(start))
	event("response.in_progress", "response", raw(start))
	item := resp.Output[0]
	done := item
	text := ""
	if item.Arguments != nil {
		text = *item.Arguments
		empty := ""
		item.Arguments, item.Status = &empty, "in_progress"
	} else {
		text = (*item.Content)[0].Text
		empty := []outputText{}
		item.Content, item.Status = &empty, "in_progress"
	}
	event("response.output_item.added", "output_index", 0, "item", item)
	part := outputText{Type: "output_text", Annotations: []any{}, Logprobs: []any{}}
	if r.tool == "" {
		event("response.content_part.added", "item_id", item.ID, "output_index", 0, "content_index", 0, "part", part)
	}
	for i := 0; i < r.tokens; i++ {
		if stall && i == r.tokens/2 && !s.stallStream(ctx, send, stallFor) {
			return statusClientClosed
		}
		if interval > 0 && i > 0 {
			if !send() || !wait(ctx, interval) {
				return statusClientClosed
			}
		}
		if failed != nil && i == r.tokens/2 {
			event("response.failed", "response", raw(failed))
			if !send() {
				return statusClientClosed
			}
			return http.StatusOK
		}
		delta := r.plain(i, i+1)
		if r.tool == "" {
			event("response.output_text.delta", "item_id", item.ID, "output_index", 0, "content_index", 0, "delta", delta, "logprobs", []any{})
		} else {
			event("response.function_call_arguments.delta", "item_id", item.ID, "output_index", 0, "delta", delta)
		}
	}
	if r.tool == "" {
		event("response.output_text.done", "item_id", item.ID, "output_index", 0, "content_index", 0, "text", text, "logprobs", []any{})
		part.Text = text
		event("response.content_part.done", "item_id", item.ID, "output_index", 0, "content_index", 0, "part", part)
	} else {
		event("response.function_call_arguments.done", "item_id", item.ID, "output_index", 0, "name", r.tool, "arguments", text)
	}
	event("response.output_item.done", "output_index", 0, "item", done)
	last := "response.completed"
	if resp.Status == "incomplete" {
		last = "response.incomplete"
	}
	event(last, "response", raw(final))
	if !send() {
		return statusClientClosed
	}
	return http.StatusOK
}

// serveStoredResponse serves what follows a kept response, rest being
// the path after /v1/responses/: GET {id} the response, DELETE {id} its
// deletion, POST {id}/cancel (a response that did not run in the
// background cannot be cancelled: 400), GET {id}/input_items its input
// items, each with an id. An id not kept is 404.
func (s *Server) serveStoredResponse(w http.ResponseWriter, r *http.Request, rest string) {
	id, sub, _ := strings.Cut(rest, "/")
	stored, ok := s.responses.get(id)
	notFound := func() {
		e := invalidRequest("", "Response with id '"+id+"' not found.")
		e.Status = http.StatusNotFound
		writeError(w, e, 0)
	}
	switch sub {
	case "":
		if !onlyMethod(w, r, http.MethodGet, http.MethodDelete) {
			return
		}
		switch {
		case !ok:
			notFound()
		case r.Method == http.MethodDelete:
			s.responses.remove(id)
			b, _ := json.Marshal(map[string]any{"id": id, "object": "response", "deleted": true})
			writeJSON(w, append(b, '\n'))
		default:
			writeJSON(w, append(stored.resp, '\n'))
		}
	case "cancel":
		if !onlyMethod(w, r, http.MethodPost) {
			return
		}
		if !ok {
			notFound()
			return
		}
		writeError(w, invalidRequest("", "Cannot cancel a synchronous response."), 0)
	case "input_items":
		if !onlyMethod(w, r, http.MethodGet) {
			return
		}
		if !ok {
			notFound()
			return
		}
		list := struct {
			Object  string            `json:"object"`
			Data    []json.RawMessage `json:"data"`
			FirstID *string           `json:"first_id"`
			LastID  *string           `json:"last_id"`
			HasMore bool              `json:"has_more"`
		}{Object: "list", Data: []json.RawMessage{}}
		for i, it := range stored.input {
			var m map[string]any
			if json.Unmarshal(it, &m) != nil || m == nil {
				continue
			}
			if _, has := m["id"]; !has {
				m["id"] = "msg_" + id[len("resp_"):] + strconv.Itoa(i)
			}
			b, _ := json.Marshal(m) // decoded JSON: cannot fail
			list.Data = append(list.Data, b)
		}
		if n := len(list.Data); n > 0 {
			var first, last struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(list.Data[0], &first)
			_ = json.Unmarshal(list.Data[n-1], &last)
			list.FirstID, list.LastID = &first.ID, &last.ID
		}
		b, _ := json.Marshal(list) // decoded JSON: cannot fail
		writeJSON(w, append(b, '\n'))
	default:
		writeError(w, apiError{Status: http.StatusNotFound, Type: "invalid_request_error",
			Message: "Invalid URL (" + r.Method + " " + r.URL.Path + ")"}, 0)
	}
}
