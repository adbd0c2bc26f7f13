package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
)

// Request is a Responses request: the stateless subset Weir translates,
// and the fields it accepts and echoes or refuses (Parse).
type Request struct {
	Model string `json:"model"`
	// Input is a string (one user message) or a list of items.
	Input        Input   `json:"input"`
	Instructions *string `json:"instructions"`
	// Tools are function tools; Parse refuses the built-in kinds.
	Tools []Tool `json:"tools"`
	// ToolChoice is "none", "auto", "required" or {"type":"function",
	// "name"}, as the client sent it.
	ToolChoice        json.RawMessage   `json:"tool_choice"`
	Text              *TextConfig       `json:"text"`
	MaxOutputTokens   *int64            `json:"max_output_tokens"`
	Temperature       *float64          `json:"temperature"`
	TopP              *float64          `json:"top_p"`
	FrequencyPenalty  *float64          `json:"frequency_penalty"`
	PresencePenalty   *float64          `json:"presence_penalty"`
	Stream            bool              `json:"stream"`
	Metadata          map[string]string `json:"metadata"`
	ParallelToolCalls *bool             `json:"parallel_tool_calls"`
	User              string            `json:"user"`
	Reasoning         *Reasoning        `json:"reasoning"`
	ServiceTier       string            `json:"service_tier"`
	PromptCacheKey    string            `json:"prompt_cache_key"`
	// PromptCacheRetention ("in_memory", "24h") is passed on as it is.
	PromptCacheRetention string `json:"prompt_cache_retention"`
	SafetyIdentifier     string `json:"safety_identifier"`
	// Store defaults to true in OpenAI's API; the translation keeps
	// nothing, so it takes a request that leaves it out or sets it false,
	// and refuses true (which a platform that keeps responses serves).
	Store *bool `json:"store"`
}

// Input is a request's input: Text when the client sent a string, else
// Items.
type Input struct {
	Text   string
	Items  []Item
	IsText bool
}

// UnmarshalJSON reads a string or a list of items.
func (in *Input) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		in.IsText = true
		return json.Unmarshal(b, &in.Text)
	}
	return json.Unmarshal(b, &in.Items)
}

// Item is one input item: a message (Type "message", or "" with a
// Role), a function_call the model made earlier, or the
// function_call_output that answers it.
type Item struct {
	Type   string `json:"type"`
	ID     string `json:"id"`
	Status string `json:"status"`
	// Role and Content are a message's.
	Role    string  `json:"role"`
	Content Content `json:"content"`
	// CallID ties a function_call to its function_call_output; Name and
	// Arguments are the call's.
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	// Output is a function_call_output's: a string or content parts.
	Output Content `json:"output"`
}

// Content is a message's content or a call's output: Text when the client
// sent a string, else Parts. Set is false when it was absent or null.
type Content struct {
	Text   string
	Parts  []Part
	IsText bool
	Set    bool
}

// UnmarshalJSON reads a string, a list of parts, or null.
func (c *Content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil
	case len(b) > 0 && b[0] == '"':
		c.IsText, c.Set = true, true
		return json.Unmarshal(b, &c.Text)
	}
	c.Set = true
	return json.Unmarshal(b, &c.Parts)
}

// Part is one content part: input_text, input_image, input_file (a
// message's input), output_text or refusal (an assistant message's, as
// an earlier response gave it).
type Part struct {
	Type string `json:"type"`
	Text string `json:"text"`
	// ImageURL is a URL or a data URL; Detail is "low", "high" or "auto".
	ImageURL string `json:"image_url"`
	Detail   string `json:"detail"`
	// FileID names a file uploaded to OpenAI; FileData is a file's bytes
	// as a data URL, with its Filename; FileURL is where to fetch it.
	FileID   string `json:"file_id"`
	FileData string `json:"file_data"`
	Filename string `json:"filename"`
	FileURL  string `json:"file_url"`
	Refusal  string `json:"refusal"`
}

// Tool is one tool a request offers: a function tool, or a built-in one
// (which Parse refuses). Raw is the tool as the client sent it, which the
// response echoes.
type Tool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
	Raw         json.RawMessage `json:"-"`
}

// UnmarshalJSON reads a tool and keeps it as it came.
func (t *Tool) UnmarshalJSON(b []byte) error {
	type plain Tool
	if err := json.Unmarshal(b, (*plain)(t)); err != nil {
		return err
	}
	t.Raw = append(json.RawMessage(nil), b...)
	return nil
}

// TextConfig is the request's text: the format of the output and its
// verbosity.
type TextConfig struct {
	Format    *Format `json:"format,omitempty"`
	Verbosity string  `json:"verbosity,omitempty"`
}

// Format is text.format: "text", "json_object", or "json_schema" with
// a Name and a Schema.
type Format struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Description *string         `json:"description,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// Reasoning is the request's reasoning configuration: its Effort is
// translated; no summary comes back (Chat Completions gives none).
type Reasoning struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
	// GenerateSummary is the older name of Summary.
	GenerateSummary *string `json:"generate_summary"`
}

// Error is a request that Parse or ChatBody refuses: Param names the
// parameter at fault. Unsupported marks a request that OpenAI's API
// would take but that cannot be translated to Chat Completions (state
// kept by the server, a built-in tool); otherwise it is malformed.
type Error struct {
	Param       string
	Message     string
	Unsupported bool
}

func (e *Error) Error() string { return e.Param + ": " + e.Message }

func invalid(param, format string, a ...any) *Error {
	return &Error{Param: param, Message: fmt.Sprintf(format, a...)}
}

func unsupported(param, format string, a ...any) *Error {
	return &Error{Param: param, Message: fmt.Sprintf(format, a...), Unsupported: true}
}

// The request's top-level fields Parse knows: those it translates, those
// it accepts for what they are (vacuous without the built-in tools and
// stored state Weir refuses), and those it refuses unless they ask for
// nothing.
var knownFields = map[string]bool{
	// translated or echoed
	"model": true, "input": true, "instructions": true, "tools": true, "tool_choice": true,
	"text": true, "max_output_tokens": true, "temperature": true, "top_p": true,
	"frequency_penalty": true, "presence_penalty": true, "stream": true, "metadata": true,
	"parallel_tool_calls": true, "user": true, "reasoning": true, "service_tier": true,
	"prompt_cache_key": true, "prompt_cache_retention": true, "safety_identifier": true, "store": true,
	// accepted with no effect
	"include": true, "stream_options": true, "max_tool_calls": true,
	// refused unless they ask for nothing
	"previous_response_id": true, "conversation": true, "background": true, "prompt": true,
	"truncation": true, "top_logprobs": true,
}

// Parse reads and checks a Responses request. It refuses, as an *Error
// naming the parameter, a malformed request and one that asks for what
// the translation to Chat Completions cannot carry.
func Parse(body []byte) (*Request, error) {
	r, raw, ok := decodeFast(body)
	if !ok {
		return parseSlow(body)
	}
	if err := refuseState(raw); err != nil {
		return nil, err
	}
	if err := r.check(raw); err != nil {
		return nil, err
	}
	return r, nil
}

// parseSlow is Parse with encoding/json alone: the reference decodeFast
// must agree with, and what reads (and refuses) a request it does not.
func parseSlow(body []byte) (*Request, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return nil, invalid("", "request body must be a JSON object")
	}
	names := make([]string, 0, len(raw))
	for k := range raw {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !knownFields[k] {
			return nil, invalid(k, "unknown parameter: '%s'", k)
		}
	}
	if err := refuseState(raw); err != nil {
		return nil, err
	}
	var r Request
	if err := json.Unmarshal(body, &r); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, invalid(te.Field, "%s has the wrong type (a JSON %s)", te.Field, te.Value)
		}
		return nil, invalid("", "request body is not valid JSON: %v", err)
	}
	if err := r.check(raw); err != nil {
		return nil, err
	}
	return &r, nil
}

// refuseState refuses the fields that ask for something the translation
// cannot carry: state kept by OpenAI's servers, a run in the background,
// reusable prompts, truncation by the server, log probabilities. Each is
// taken when it asks for nothing (null, false, "", "disabled", 0).
func refuseState(raw map[string]json.RawMessage) *Error {
	set := func(name string) bool {
		v, ok := raw[name]
		if !ok {
			return false
		}
		switch string(bytes.TrimSpace(v)) {
		case "null", "false", `""`, "0", `"disabled"`:
			return false
		}
		return true
	}
	switch {
	case set("previous_response_id"):
		return unsupported("previous_response_id", "Weir keeps no responses to continue: send the whole conversation as input instead")
	case set("conversation"):
		return unsupported("conversation", "Weir keeps no conversations: send the whole conversation as input instead")
	case set("store"):
		return unsupported("store", "Weir keeps no responses: leave store out or set it to false")
	case set("background"):
		return unsupported("background", "Weir runs no responses in the background")
	case set("prompt"):
		return unsupported("prompt", "reusable prompts are kept by OpenAI, not by Weir: send the prompt's text as instructions and input")
	case set("truncation"):
		return unsupported("truncation", "Weir does not truncate input: leave truncation out or set it to \"disabled\"")
	case set("top_logprobs"):
		return unsupported("top_logprobs", "log probabilities are not translated")
	}
	if v, ok := raw["include"]; ok {
		var include []string
		if json.Unmarshal(v, &include) != nil {
			return invalid("include", "include must be a list of strings")
		}
		if slices.Contains(include, "message.output_text.logprobs") {
			return unsupported("include", "log probabilities are not translated")
		}
	}
	return nil
}

// The roles a message item may have.
var roles = []string{"user", "assistant", "system", "developer"}

// check checks what decoding alone does not.
func (r *Request) check(raw map[string]json.RawMessage) *Error {
	if r.Model == "" {
		return invalid("model", "you must provide a model parameter")
	}
	if v, ok := raw["input"]; !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return invalid("input", "missing required parameter: input")
	}
	if r.MaxOutputTokens != nil && *r.MaxOutputTokens < 1 {
		return invalid("max_output_tokens", "max_output_tokens must be a positive integer")
	}
	for i, it := range r.Input.Items {
		if err := checkItem(fmt.Sprintf("input[%d]", i), it); err != nil {
			return err
		}
	}
	for i, t := range r.Tools {
		p := fmt.Sprintf("tools[%d]", i)
		switch {
		case t.Type != "function":
			return unsupported(p+".type", "built-in tools (%s) are not translated to Chat Completions: only function tools are", t.Type)
		case t.Name == "":
			return invalid(p+".name", "a function tool must have a name")
		}
	}
	if r.Text != nil && r.Text.Format != nil {
		f := r.Text.Format
		switch f.Type {
		case "text", "json_object":
		case "json_schema":
			if f.Name == "" {
				return invalid("text.format.name", "a json_schema format must have a name")
			}
			if len(f.Schema) == 0 {
				return invalid("text.format.schema", "a json_schema format must have a schema")
			}
		default:
			return invalid("text.format.type", "text.format.type must be text, json_object or json_schema, not %q", f.Type)
		}
	}
	if _, err := chatToolChoice(r.ToolChoice); err != nil {
		return err
	}
	return nil
}

// checkItem checks one input item; p is its parameter path.
func checkItem(p string, it Item) *Error {
	switch it.Type {
	case "", "message":
		if !slices.Contains(roles, it.Role) {
			return invalid(p+".role", "role must be one of user, assistant, system and developer, not %q", it.Role)
		}
		if !it.Content.Set {
			return invalid(p+".content", "a message must have content")
		}
		for j, part := range it.Content.Parts {
			if err := checkPart(p+".content["+strconv.Itoa(j)+"]", it.Role, part); err != nil {
				return err
			}
		}
	case "function_call":
		switch {
		case it.CallID == "":
			return invalid(p+".call_id", "a function_call must have a call_id")
		case it.Name == "":
			return invalid(p+".name", "a function_call must have a name")
		}
	case "function_call_output":
		if it.CallID == "" {
			return invalid(p+".call_id", "a function_call_output must have a call_id")
		}
		if !it.Output.Set {
			return invalid(p+".output", "a function_call_output must have an output")
		}
		for j, part := range it.Output.Parts {
			if part.Type != "input_text" && part.Type != "output_text" {
				return unsupported(p+".output["+strconv.Itoa(j)+"]",
					"a function_call_output is translated to a Chat Completions tool message, which takes text only, not %s", part.Type)
			}
		}
	case "reasoning":
		return unsupported(p, "reasoning items are not translated to Chat Completions")
	case "item_reference":
		return unsupported(p, "Weir keeps no items to refer to: send the item itself")
	default:
		return unsupported(p+".type", "input items of type %s are not translated to Chat Completions", it.Type)
	}
	return nil
}

// checkPart checks one part of a message of role; p is its parameter
// path.
func checkPart(p, role string, part Part) *Error {
	switch part.Type {
	case "input_text":
		return nil
	case "output_text", "refusal":
		if role != "assistant" {
			return invalid(p+".type", "%s is an assistant message's content, not a %s message's", part.Type, role)
		}
		return nil
	case "input_image", "input_file":
		if role != "user" {
			return invalid(p+".type", "a %s message takes text only, not %s", role, part.Type)
		}
	default:
		return unsupported(p+".type", "content parts of type %s are not translated to Chat Completions", part.Type)
	}
	if part.Type == "input_image" {
		switch {
		case part.ImageURL != "":
			return nil
		case part.FileID != "":
			return unsupported(p+".file_id", "an image by file_id is not translated to Chat Completions: send its image_url (a URL or a data URL)")
		}
		return invalid(p+".image_url", "an input_image must have an image_url")
	}
	switch {
	case part.FileData != "" || part.FileID != "":
		return nil
	case part.FileURL != "":
		return unsupported(p+".file_url", "a file by file_url is not translated to Chat Completions: send its file_data")
	}
	return invalid(p+".file_data", "an input_file must have file_data or a file_id")
}
