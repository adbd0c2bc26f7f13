package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/weir-gateway/weir/openaiwire"
)

// DefaultMaxTokens is the max_tokens a Messages request gets when the
// Chat Completions request it is translated from sets none: Anthropic
// requires one, and every Claude model can answer this many.
const DefaultMaxTokens = 4096

// ParseRequest reads a Messages request and checks what the translation
// needs of it: a model and messages, each a user or assistant turn. It
// does not check max_tokens, which count_tokens does not take.
func ParseRequest(body []byte) (*Request, *RequestError) {
	var r Request
	if err := unmarshalRequest(body, &r); err != nil {
		return nil, refuse("", "the request body is not a valid Messages request: "+err.Error())
	}
	if r.Model == "" {
		return nil, refuse("model", "model: field required")
	}
	if len(r.Messages) == 0 {
		return nil, refuse("messages", "messages: at least one message is required")
	}
	for i, m := range r.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return nil, refuse(fmt.Sprintf("messages.%d.role", i), fmt.Sprintf("unexpected role %q: want \"user\" or \"assistant\"", m.Role))
		}
	}
	return &r, nil
}

// RequestToChat translates a Messages request to Chat Completions: the
// system prompt becomes the first message, a user turn's tool_result
// blocks become tool messages (before the rest of the turn, as the calls
// they answer come first), an assistant turn's tool_use blocks its tool
// calls, ids kept. cache_control and top_k, which only tune the answer,
// have no Chat Completions form and are dropped. What the translation
// cannot carry without changing the answer is refused as Unsupported:
// thinking (its configuration, when enabled, and thinking and
// redacted_thinking blocks, whose signatures only Anthropic reads), a
// tool_result's is_error, a server tool (one with a type), a document or
// a block of another kind, an image source other than base64 and url, an
// image in a tool_result. A streamed request asks for the usage chunk,
// which settles its tokens.
func RequestToChat(r *Request) ([]byte, *RequestError) {
	out, perr := ChatRequestOf(r)
	if perr != nil {
		return nil, perr
	}
	b, err := out.Marshal()
	if err != nil {
		return nil, refuse("", "could not encode the translated request: "+err.Error())
	}
	return b, nil
}

// ChatRequestOf is RequestToChat's translation before it is encoded, for
// a caller that reads the fields it needs from it rather than parsing the
// body again.
func ChatRequestOf(r *Request) (*openaiwire.ChatRequest, *RequestError) {
	if len(r.Thinking) > 0 && !bytes.Equal(r.Thinking, []byte("null")) {
		var th struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(r.Thinking, &th) != nil || th.Type != "disabled" {
			return nil, unsupported("thinking", "extended thinking cannot be served through this gateway's translation to Chat Completions")
		}
	}
	out := openaiwire.ChatRequest{
		Model:       r.Model,
		Temperature: r.Temperature,
		TopP:        r.TopP,
		Stream:      r.Stream,
	}
	if r.MaxTokens > 0 {
		out.MaxTokens = &r.MaxTokens
	}
	if r.Stream {
		out.StreamOptions = &openaiwire.StreamOptions{IncludeUsage: true}
	}
	if len(r.StopSequences) > 0 {
		out.Stop, _ = json.Marshal(r.StopSequences) // strings: cannot fail
	}
	if r.Metadata != nil {
		out.User = r.Metadata.UserID
	}
	if len(r.System) > 0 {
		var sys strings.Builder
		for i, b := range r.System {
			if b.Type != BlockText {
				return nil, refuse(fmt.Sprintf("system.%d.type", i), fmt.Sprintf("a system prompt holds text blocks, not %q", b.Type))
			}
			if sys.Len() > 0 {
				sys.WriteString("\n\n")
			}
			sys.WriteString(b.Text)
		}
		out.Messages = append(out.Messages, openaiwire.Message{Role: "system", Content: openaiwire.TextContent(sys.String())})
	}
	if out.Messages == nil {
		out.Messages = make([]openaiwire.Message, 0, len(r.Messages))
	}
	for i, m := range r.Messages {
		var err *RequestError
		if out.Messages, err = appendTurn(out.Messages, m, i); err != nil {
			return nil, err
		}
	}
	for i, t := range r.Tools {
		if !t.IsClientTool() {
			return nil, unsupported(fmt.Sprintf("tools.%d.type", i), fmt.Sprintf("the server tool %q cannot be served through this gateway's translation", t.Type))
		}
		params := t.InputSchema
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object"}`)
		}
		fn := openaiwire.Function{Name: t.Name, Parameters: params}
		if t.Description != "" {
			fn.Description = &t.Description
		}
		out.Tools = append(out.Tools, openaiwire.Tool{Type: "function", Function: fn})
	}
	if tc := r.ToolChoice; tc != nil {
		var choice any
		switch tc.Type {
		case "auto":
			choice = "auto"
		case "any":
			choice = "required"
		case "none":
			choice = "none"
		case "tool":
			if tc.Name == "" {
				return nil, refuse("tool_choice.name", "tool_choice.name: field required")
			}
			choice = openaiwire.FunctionChoice(tc.Name)
		default:
			return nil, refuse("tool_choice.type", fmt.Sprintf("unknown tool_choice type %q: want auto, any, tool or none", tc.Type))
		}
		out.ToolChoice, _ = json.Marshal(choice) // plain values: cannot fail
		if tc.DisableParallelToolUse && len(out.Tools) > 0 {
			no := false
			out.ParallelToolCalls = &no
		}
	}
	return &out, nil
}

// appendTurn appends to out the chat messages that say turn i of a
// Messages conversation.
func appendTurn(out []openaiwire.Message, m Message, i int) ([]openaiwire.Message, *RequestError) {
	var parts []openaiwire.Part
	var calls []openaiwire.ToolCall
	for j, b := range m.Content {
		// where names the block, for an error (made only for one).
		where := func() string { return "messages." + strconv.Itoa(i) + ".content." + strconv.Itoa(j) }
		switch b.Type {
		case BlockText:
			parts = append(parts, openaiwire.Part{Type: "text", Text: b.Text})
		case BlockImage:
			if m.Role != "user" {
				return nil, refuse(where(), "an image is a user's content")
			}
			p, err := imageToChat(b.Source, where())
			if err != nil {
				return nil, err
			}
			parts = append(parts, p)
		case BlockToolUse:
			if m.Role != "assistant" {
				return nil, refuse(where(), "a tool_use block is an assistant's content")
			}
			args := b.Input
			if len(bytes.TrimSpace(args)) == 0 {
				args = json.RawMessage(`{}`)
			}
			calls = append(calls, openaiwire.ToolCall{ID: b.ID, Type: "function", Function: openaiwire.FunctionCall{Name: b.Name, Arguments: string(args)}})
		case BlockToolResult:
			if m.Role != "user" {
				return nil, refuse(where(), "a tool_result block is a user's content")
			}
			if b.IsError {
				return nil, unsupported(where()+".is_error", "a tool_result's is_error cannot be served through this gateway's translation")
			}
			text, err := toolResultText(b.Content, where)
			if err != nil {
				return nil, err
			}
			out = append(out, openaiwire.Message{Role: "tool", ToolCallID: b.ToolUseID, Content: openaiwire.TextContent(text)})
		case BlockThinking, BlockRedactedThinking:
			// Its signature cannot cross Chat Completions.
			return nil, unsupported(where()+".type", fmt.Sprintf("%s blocks cannot be served through this gateway's translation", b.Type))
		default:
			return nil, unsupported(where()+".type", fmt.Sprintf("content blocks of type %q cannot be served through this gateway's translation", b.Type))
		}
	}
	if len(parts) == 0 && len(calls) == 0 {
		return out, nil
	}
	msg := openaiwire.Message{Role: m.Role, ToolCalls: calls}
	switch {
	case len(parts) == 0:
		// An assistant's calls alone: content null.
	case len(parts) == 1 && parts[0].Type == "text":
		msg.Content = openaiwire.TextContent(parts[0].Text)
	case allText(parts):
		var s strings.Builder
		for _, p := range parts {
			s.WriteString(p.Text)
		}
		msg.Content = openaiwire.TextContent(s.String())
	default:
		msg.Content = openaiwire.PartsContent(parts)
	}
	return append(out, msg), nil
}

func allText(parts []openaiwire.Part) bool {
	for _, p := range parts {
		if p.Type != "text" {
			return false
		}
	}
	return true
}

// imageToChat is an image block's source as an image_url part: a data
// URL for base64 bytes, the URL itself for a url source.
func imageToChat(src *Source, at string) (openaiwire.Part, *RequestError) {
	switch {
	case src == nil:
		return openaiwire.Part{}, refuse(at+".source", "source: field required")
	case src.Type == "base64":
		return openaiwire.Part{Type: "image_url", ImageURL: &openaiwire.ImageURL{URL: "data:" + src.MediaType + ";base64," + src.Data}}, nil
	case src.Type == "url":
		return openaiwire.Part{Type: "image_url", ImageURL: &openaiwire.ImageURL{URL: src.URL}}, nil
	}
	return openaiwire.Part{}, unsupported(at+".source.type", fmt.Sprintf("image sources of type %q cannot be served through this gateway's translation", src.Type))
}

// toolResultText is a tool_result's content as a tool message's text.
// Chat Completions' tool messages hold text only. at names the block.
func toolResultText(c Content, at func() string) (string, *RequestError) {
	if len(c) == 1 && c[0].Type == BlockText {
		return c[0].Text, nil
	}
	var s strings.Builder
	for k, b := range c {
		if b.Type != BlockText {
			return "", unsupported(fmt.Sprintf("%s.content.%d.type", at(), k), fmt.Sprintf("a tool_result translated to Chat Completions holds text only, not %q", b.Type))
		}
		s.WriteString(b.Text)
	}
	return s.String(), nil
}

// RequestFromChat translates a Chat Completions request to Messages: the
// system and developer messages become the system prompt, tool messages
// tool_result blocks in a user turn, tool calls tool_use blocks (ids
// kept), image_url parts image blocks (a data URL as base64, another as a
// url source), tools and tool_choice their Anthropic forms. Turns of one
// role in a row are joined into one, as Anthropic wants them alternating.
// max_tokens is max_completion_tokens, else max_tokens, else
// defaultMaxTokens; temperature is capped at Anthropic's 1. What would
// change the answer and has no Messages form is refused: n above 1,
// logprobs, a JSON response_format, audio, the legacy functions.
func RequestFromChat(body []byte, defaultMaxTokens int64) (*Request, *RequestError) {
	var in openaiwire.ChatRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, refuse("", "the request body is not a valid chat completions request: "+err.Error())
	}
	switch {
	case in.N != nil && *in.N > 1:
		return nil, refuse("n", "this platform answers one choice: n must be 1")
	case in.Logprobs:
		return nil, refuse("logprobs", "this platform does not answer logprobs")
	case in.ResponseFormat != nil && in.ResponseFormat.Type != "" && in.ResponseFormat.Type != "text":
		return nil, refuse("response_format", fmt.Sprintf("this platform does not take response_format %q", in.ResponseFormat.Type))
	case in.Functions != nil:
		return nil, refuse("functions", "functions is not supported by this platform: use tools")
	}
	for _, m := range in.Modalities {
		if m != "text" {
			return nil, refuse("modalities", fmt.Sprintf("this platform does not answer %q", m))
		}
	}
	r := &Request{Model: in.Model, Stream: in.Stream, TopP: in.TopP, TopK: in.TopK, MaxTokens: defaultMaxTokens}
	switch {
	case in.MaxCompletionTokens != nil:
		r.MaxTokens = *in.MaxCompletionTokens
	case in.MaxTokens != nil:
		r.MaxTokens = *in.MaxTokens
	}
	if t := in.Temperature; t != nil {
		capped := min(*t, 1)
		r.Temperature = &capped
	}
	if in.User != "" {
		r.Metadata = &Metadata{UserID: in.User}
	}
	if len(in.Stop) > 0 && !bytes.Equal(in.Stop, []byte("null")) {
		var one string
		if json.Unmarshal(in.Stop, &one) == nil {
			r.StopSequences = []string{one}
		} else if err := json.Unmarshal(in.Stop, &r.StopSequences); err != nil {
			return nil, refuse("stop", "stop must be a string or an array of strings")
		}
	}
	for i, m := range in.Messages {
		if err := r.addChatMessage(m, i); err != nil {
			return nil, err
		}
	}
	if len(r.Messages) == 0 {
		return nil, refuse("messages", "the conversation needs a user or assistant message")
	}
	for i, t := range in.Tools {
		if t.Type != "function" {
			return nil, refuse(fmt.Sprintf("tools[%d].type", i), fmt.Sprintf("this platform takes function tools, not %q", t.Type))
		}
		schema := t.Function.Parameters
		if len(schema) == 0 || bytes.Equal(schema, []byte("null")) {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		r.Tools = append(r.Tools, Tool{Name: t.Function.Name, Description: t.Function.DescriptionText(), InputSchema: schema})
	}
	tc, err := toolChoiceFromChat(in.ToolChoice)
	if err != nil {
		return nil, err
	}
	if in.ParallelToolCalls != nil && !*in.ParallelToolCalls && len(r.Tools) > 0 {
		if tc == nil {
			tc = &ToolChoice{Type: "auto"}
		}
		if tc.Type != "none" {
			tc.DisableParallelToolUse = true
		}
	}
	if tc != nil && (len(r.Tools) > 0 || tc.Type == "none") {
		r.ToolChoice = tc
	}
	return r, nil
}

// addChatMessage adds the i-th chat message to r, joining it to the last
// turn if that has the same role.
func (r *Request) addChatMessage(m openaiwire.Message, i int) *RequestError {
	at := fmt.Sprintf("messages[%d]", i)
	var role string
	var blocks []Block
	switch m.Role {
	case "system", "developer":
		r.System = append(r.System, Block{Type: BlockText, Text: m.Content.Text()})
		return nil
	case "user":
		role = "user"
		text, parts, err := m.Content.Parse()
		if err != nil {
			return refuse(at+".content", err.Error())
		}
		if parts == nil && !m.Content.IsNull() {
			blocks = append(blocks, Block{Type: BlockText, Text: text})
		}
		for j, p := range parts {
			b, err := partFromChat(p, fmt.Sprintf("%s.content[%d]", at, j))
			if err != nil {
				return err
			}
			blocks = append(blocks, b)
		}
	case "assistant":
		role = "assistant"
		if text := m.Content.Text(); text != "" {
			blocks = append(blocks, Block{Type: BlockText, Text: text})
		}
		for j, tc := range m.ToolCalls {
			args := json.RawMessage(strings.TrimSpace(tc.Function.Arguments))
			if len(args) == 0 {
				args = json.RawMessage(`{}`)
			}
			if !json.Valid(args) || args[0] != '{' {
				return refuse(fmt.Sprintf("%s.tool_calls[%d].function.arguments", at, j), "the arguments must be a JSON object")
			}
			blocks = append(blocks, Block{Type: BlockToolUse, ID: tc.ID, Name: tc.Function.Name, Input: args})
		}
	case "tool":
		role = "user"
		b := Block{Type: BlockToolResult, ToolUseID: m.ToolCallID}
		if text := m.Content.Text(); text != "" {
			b.Content = Content{{Type: BlockText, Text: text}}
		}
		blocks = append(blocks, b)
	default:
		return refuse(at+".role", fmt.Sprintf("this platform does not take messages of role %q", m.Role))
	}
	if len(blocks) == 0 {
		return nil // nothing to say: Anthropic refuses empty turns
	}
	if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == role {
		last := &r.Messages[n-1]
		if role == "user" && blocks[0].Type == BlockToolResult {
			// Tool results answer the calls just made: they lead the turn.
			k := 0
			for k < len(last.Content) && last.Content[k].Type == BlockToolResult {
				k++
			}
			last.Content = append(last.Content[:k:k], append(blocks, last.Content[k:]...)...)
			return nil
		}
		last.Content = append(last.Content, blocks...)
		return nil
	}
	r.Messages = append(r.Messages, Message{Role: role, Content: blocks})
	return nil
}

// partFromChat is a user message's part as a content block.
func partFromChat(p openaiwire.Part, at string) (Block, *RequestError) {
	switch p.Type {
	case "text":
		return Block{Type: BlockText, Text: p.Text}, nil
	case "image_url":
		if p.ImageURL == nil || p.ImageURL.URL == "" {
			return Block{}, refuse(at+".image_url.url", "image_url.url: field required")
		}
		u := p.ImageURL.URL
		if rest, ok := strings.CutPrefix(u, "data:"); ok {
			meta, data, ok := strings.Cut(rest, ",")
			media, isBase64 := strings.CutSuffix(meta, ";base64")
			if !ok || !isBase64 {
				return Block{}, refuse(at+".image_url.url", "a data URL image must be base64")
			}
			return Block{Type: BlockImage, Source: &Source{Type: "base64", MediaType: media, Data: data}}, nil
		}
		return Block{Type: BlockImage, Source: &Source{Type: "url", URL: u}}, nil
	}
	return Block{}, refuse(at+".type", fmt.Sprintf("this platform does not take content parts of type %q", p.Type))
}

// toolChoiceFromChat is a chat tool_choice in Anthropic's form; nil for
// none given.
func toolChoiceFromChat(raw json.RawMessage) (*ToolChoice, *RequestError) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		switch mode {
		case "auto":
			return &ToolChoice{Type: "auto"}, nil
		case "required":
			return &ToolChoice{Type: "any"}, nil
		case "none":
			return &ToolChoice{Type: "none"}, nil
		}
		return nil, refuse("tool_choice", fmt.Sprintf("unknown tool_choice %q: want auto, required or none", mode))
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &named); err != nil || named.Type != "function" || named.Function.Name == "" {
		return nil, refuse("tool_choice", "tool_choice must be auto, required, none or a function named")
	}
	return &ToolChoice{Type: "tool", Name: named.Function.Name}, nil
}
