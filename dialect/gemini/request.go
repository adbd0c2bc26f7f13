package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"path"
	"slices"
	"strings"

	"github.com/weir-gateway/weir/openaiwire"
)

// Translated is a Chat Completions request in Gemini's terms.
type Translated struct {
	// Model is the model the request names: it goes in the URL.
	Model string
	// Stream: the client asked for a stream (streamGenerateContent).
	Stream bool
	// IncludeUsage: the client asked for the stream's usage chunk
	// (stream_options.include_usage).
	IncludeUsage bool
	Request      Request
}

// RefusedError is a request that cannot be said in Gemini's terms: Param
// names the Chat Completions parameter, as OpenAI's errors do.
type RefusedError struct {
	Param   string
	Message string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s: %s", e.Param, e.Message)
}

func refusef(param, format string, args ...any) *RefusedError {
	return &RefusedError{Param: param, Message: fmt.Sprintf(format, args...)}
}

// SkipSignature is the thought signature Gemini accepts for a function
// call it did not write (or whose signature was lost): a call that comes
// back without its own is sent with it, so that Gemini 3 models take the
// history.
const SkipSignature = "skip_thought_signature_validator"

// FromChat translates a Chat Completions request body. A request it
// cannot translate is a *RefusedError; a body that is not a Chat
// Completions request at all is one on "" (the body).
func FromChat(body []byte) (*Translated, error) {
	var in openaiwire.ChatRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, refusef("", "the request body is not a Chat Completions request: %v", err)
	}
	if err := refused(&in); err != nil {
		return nil, err
	}
	t := &Translated{Model: in.Model, Stream: in.Stream, IncludeUsage: in.StreamOptions.IncludesUsage()}
	if t.Model == "" {
		return nil, refusef("model", "you must provide a model parameter")
	}
	if err := translateMessages(in.Messages, &t.Request); err != nil {
		return nil, err
	}
	if err := translateTools(&in, &t.Request); err != nil {
		return nil, err
	}
	gc, err := generationConfig(&in)
	if err != nil {
		return nil, err
	}
	t.Request.GenerationConfig = gc
	return t, nil
}

// refused reports the first parameter of in that Gemini cannot honour
// and that changes what the client gets back: not a hint to drop.
func refused(in *openaiwire.ChatRequest) error {
	switch {
	case in.Logprobs:
		return refusef("logprobs", "log probabilities are not translated to Gemini")
	case slices.Contains(in.Modalities, "audio") || len(in.Audio) > 0 && string(in.Audio) != "null":
		return refusef("modalities", "audio output is not translated to Gemini")
	}
	return nil
}

func translateMessages(msgs []openaiwire.Message, out *Request) error {
	if len(msgs) == 0 {
		return refusef("messages", "'messages' must hold at least one message")
	}
	// names maps each tool call's id to its function, for the results
	// that answer it: Gemini names a result by its function.
	names := map[string]string{}
	var system []Part
	for i, m := range msgs {
		param := fmt.Sprintf("messages[%d]", i)
		var c Content
		switch m.Role {
		case "system", "developer":
			parts, err := textParts(m.Content, param)
			if err != nil {
				return err
			}
			system = append(system, parts...)
			continue
		case "user":
			parts, err := userParts(m.Content, param)
			if err != nil {
				return err
			}
			c = Content{Role: RoleUser, Parts: parts}
		case "assistant":
			parts, err := assistantParts(m, param, names)
			if err != nil {
				return err
			}
			c = Content{Role: RoleModel, Parts: parts}
		case "tool", "function":
			name := m.Name
			if m.Role == "tool" {
				var ok bool
				if name, ok = names[m.ToolCallID]; !ok {
					return refusef(param+".tool_call_id", "%q answers no tool call of an earlier assistant message", m.ToolCallID)
				}
			}
			text, err := plainText(m.Content, param)
			if err != nil {
				return err
			}
			id := m.ToolCallID
			c = Content{Role: RoleUser, Parts: []Part{{FunctionResponse: &FunctionResponse{ID: id, Name: name, Response: resultObject(text)}}}}
		default:
			return refusef(param+".role", "unknown role %q", m.Role)
		}
		if len(c.Parts) == 0 {
			continue // an empty turn: Gemini refuses those
		}
		// Gemini wants the turns to alternate, and a function call's
		// results in one turn: a turn of the same role as the one before
		// it joins it.
		if n := len(out.Contents); n > 0 && out.Contents[n-1].Role == c.Role {
			out.Contents[n-1].Parts = append(out.Contents[n-1].Parts, c.Parts...)
			continue
		}
		out.Contents = append(out.Contents, c)
	}
	if len(system) > 0 {
		out.SystemInstruction = &Content{Parts: system}
	}
	if len(out.Contents) == 0 {
		return refusef("messages", "no message besides the system's has content: Gemini needs one")
	}
	return nil
}

// resultObject is a function's result as Gemini's response object: a
// JSON object as it is, anything else under "content".
func resultObject(text string) json.RawMessage {
	if t := strings.TrimSpace(text); strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(map[string]string{"content": text}) // a string: cannot fail
	return b
}

// parts decodes a message's content: a string is one text part, null
// none.
func parts(c openaiwire.Content, param string) ([]openaiwire.Part, error) {
	text, ps, err := c.Parse()
	switch {
	case err != nil:
		return nil, refusef(param+".content", "neither a string nor an array of parts: %v", err)
	case ps == nil && !c.IsNull():
		return []openaiwire.Part{{Type: "text", Text: text}}, nil
	}
	return ps, nil
}

// plainText is a content of text parts as one string.
func plainText(raw openaiwire.Content, param string) (string, error) {
	ps, err := parts(raw, param)
	if err != nil {
		return "", err
	}
	var sb strings.Builder
	for j, p := range ps {
		if p.Type != "text" {
			return "", refusef(fmt.Sprintf("%s.content[%d].type", param, j), "a %q part is not translated here: only text", p.Type)
		}
		sb.WriteString(p.Text)
	}
	return sb.String(), nil
}

func textParts(raw openaiwire.Content, param string) ([]Part, error) {
	ps, err := parts(raw, param)
	if err != nil {
		return nil, err
	}
	var out []Part
	for j, p := range ps {
		if p.Type != "text" {
			return nil, refusef(fmt.Sprintf("%s.content[%d].type", param, j), "a %q part is not translated here: only text", p.Type)
		}
		if p.Text != "" {
			out = append(out, Part{Text: p.Text})
		}
	}
	return out, nil
}

func userParts(raw openaiwire.Content, param string) ([]Part, error) {
	ps, err := parts(raw, param)
	if err != nil {
		return nil, err
	}
	var out []Part
	for j, p := range ps {
		pp := fmt.Sprintf("%s.content[%d]", param, j)
		switch p.Type {
		case "text":
			if p.Text != "" {
				out = append(out, Part{Text: p.Text})
			}
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return nil, refusef(pp+".image_url.url", "required")
			}
			part, err := mediaPart(p.ImageURL.URL, pp+".image_url.url")
			if err != nil {
				return nil, err
			}
			out = append(out, part)
		case "input_audio":
			if p.InputAudio == nil || p.InputAudio.Data == "" {
				return nil, refusef(pp+".input_audio.data", "required")
			}
			mt := "audio/" + p.InputAudio.Format
			if p.InputAudio.Format == "mp3" {
				mt = "audio/mp3"
			}
			out = append(out, Part{InlineData: &Blob{MimeType: mt, Data: p.InputAudio.Data}})
		case "file":
			if p.File == nil || p.File.FileData == "" {
				return nil, refusef(pp+".file", "only a file given inline (file_data) is translated to Gemini, not a file_id")
			}
			part, err := mediaPart(p.File.FileData, pp+".file.file_data")
			if err != nil {
				return nil, err
			}
			out = append(out, part)
		default:
			return nil, refusef(pp+".type", "a %q part is not translated to Gemini", p.Type)
		}
	}
	return out, nil
}

// mediaPart is an image or file: a data: URL inline, any other URL by
// reference, its type guessed from its extension.
func mediaPart(u, param string) (Part, error) {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		meta, data, ok := strings.Cut(rest, ",")
		mt, b64 := strings.CutSuffix(meta, ";base64")
		if !ok || !b64 || mt == "" {
			return Part{}, refusef(param, "a data URL must be data:<type>;base64,<data>")
		}
		return Part{InlineData: &Blob{MimeType: mt, Data: data}}, nil
	}
	if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "gs://") {
		return Part{}, refusef(param, "not a data, http(s) or gs URL")
	}
	clean, _, _ := strings.Cut(u, "?")
	mt := mime.TypeByExtension(path.Ext(clean))
	if i := strings.IndexByte(mt, ';'); i >= 0 {
		mt = mt[:i]
	}
	return Part{FileData: &FileData{MimeType: mt, FileURI: u}}, nil
}

func assistantParts(m openaiwire.Message, param string, names map[string]string) ([]Part, error) {
	ps, err := parts(m.Content, param)
	if err != nil {
		return nil, err
	}
	var out []Part
	for j, p := range ps {
		switch p.Type {
		case "text":
			if p.Text != "" {
				out = append(out, Part{Text: p.Text})
			}
		case "refusal":
			if p.Refusal != "" {
				out = append(out, Part{Text: p.Refusal})
			}
		default:
			return nil, refusef(fmt.Sprintf("%s.content[%d].type", param, j), "a %q part is not translated to Gemini", p.Type)
		}
	}
	calls := m.ToolCalls
	if m.FunctionCall != nil {
		calls = append(calls, openaiwire.ToolCall{Function: *m.FunctionCall})
	}
	for j, tc := range calls {
		tp := fmt.Sprintf("%s.tool_calls[%d].function", param, j)
		if tc.Function.Name == "" {
			return nil, refusef(tp+".name", "required")
		}
		args := json.RawMessage(`{}`)
		if a := strings.TrimSpace(tc.Function.Arguments); a != "" {
			if !json.Valid([]byte(a)) {
				return nil, refusef(tp+".arguments", "not JSON: Gemini takes a call's arguments as an object")
			}
			args = json.RawMessage(a)
		}
		sig := signature(tc.ExtraContent)
		if sig == "" && j == 0 {
			// Gemini 3 wants a signature on a turn's first call.
			sig = SkipSignature
		}
		if tc.ID != "" {
			names[tc.ID] = tc.Function.Name
		}
		out = append(out, Part{FunctionCall: &FunctionCall{ID: tc.ID, Name: tc.Function.Name, Args: args}, ThoughtSignature: sig})
	}
	return out, nil
}

func translateTools(in *openaiwire.ChatRequest, out *Request) error {
	var decls []FunctionDeclaration
	for i, t := range in.Tools {
		if t.Type != "function" {
			return refusef(fmt.Sprintf("tools[%d].type", i), "a %q tool is not translated to Gemini: only functions", t.Type)
		}
		decls = append(decls, declaration(t.Function))
	}
	for _, f := range in.Functions {
		decls = append(decls, declaration(f))
	}
	if len(decls) > 0 {
		out.Tools = []Tool{{FunctionDeclarations: decls}}
	}
	choice, param := in.ToolChoice, "tool_choice"
	if len(choice) == 0 || string(choice) == "null" {
		choice, param = in.FunctionCall, "function_call"
	}
	if len(choice) == 0 || string(choice) == "null" {
		return nil
	}
	cfg := &FunctionCallingConfig{}
	var mode string
	if json.Unmarshal(choice, &mode) == nil {
		switch mode {
		case "auto":
			cfg.Mode = ModeAuto
		case "none":
			cfg.Mode = ModeNone
		case "required":
			cfg.Mode = ModeAny
		default:
			return refusef(param, "unknown value %q: want none, auto or required", mode)
		}
	} else {
		var named struct {
			Type     string `json:"type"`
			Name     string `json:"name"` // function_call's form
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(choice, &named); err != nil {
			return refusef(param, "neither a string nor an object: %v", err)
		}
		name := named.Function.Name
		if param == "function_call" {
			name = named.Name
		} else if named.Type != "function" {
			return refusef(param+".type", "a %q choice is not translated to Gemini", named.Type)
		}
		if name == "" {
			return refusef(param, "names no function")
		}
		cfg.Mode, cfg.AllowedFunctionNames = ModeAny, []string{name}
	}
	if len(decls) == 0 && cfg.Mode != ModeNone {
		return refusef(param, "is only allowed when tools are given")
	}
	out.ToolConfig = &ToolConfig{FunctionCallingConfig: cfg}
	return nil
}

func declaration(f openaiwire.Function) FunctionDeclaration {
	d := FunctionDeclaration{Name: f.Name, Description: f.DescriptionText()}
	if len(f.Parameters) > 0 && string(f.Parameters) != "null" {
		d.ParametersJSONSchema = f.Parameters
	}
	return d
}

func generationConfig(in *openaiwire.ChatRequest) (*GenerationConfig, error) {
	gc := GenerationConfig{
		Temperature: in.Temperature, TopP: in.TopP, TopK: in.TopK,
		CandidateCount: in.N, PresencePenalty: in.PresencePenalty, FrequencyPenalty: in.FrequencyPenalty, Seed: in.Seed,
	}
	gc.MaxOutputTokens = in.MaxCompletionTokens
	if gc.MaxOutputTokens == nil {
		gc.MaxOutputTokens = in.MaxTokens
	}
	if stop := bytes.TrimSpace(in.Stop); len(stop) > 0 && string(stop) != "null" {
		var one string
		if json.Unmarshal(stop, &one) == nil {
			gc.StopSequences = []string{one}
		} else if err := json.Unmarshal(stop, &gc.StopSequences); err != nil {
			return nil, refusef("stop", "neither a string nor an array of strings")
		}
	}
	if rf := in.ResponseFormat; rf != nil {
		switch rf.Type {
		case "", "text":
		case "json_object":
			gc.ResponseMimeType = "application/json"
		case "json_schema":
			gc.ResponseMimeType = "application/json"
			if rf.JSONSchema != nil && len(rf.JSONSchema.Schema) > 0 && string(rf.JSONSchema.Schema) != "null" {
				gc.ResponseJSONSchema = rf.JSONSchema.Schema
			}
		default:
			return nil, refusef("response_format.type", "a %q format is not translated to Gemini", rf.Type)
		}
	}
	if b, _ := json.Marshal(gc); string(b) == "{}" { // plain values: cannot fail
		return nil, nil // nothing set: Gemini's defaults
	}
	return &gc, nil
}
