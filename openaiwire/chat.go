package openaiwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/weir-gateway/weir/internal/fastjson"
)

// The Chat Completions shapes that the dialect translations read and
// write: the fields some translation needs, nothing more. Fields a body
// read has and these do not name are ignored. Optional fields are left
// out when unset, so that a request a translation writes carries only
// what its client asked for.

// ChatRequest is a Chat Completions request.
type ChatRequest struct {
	Model    string    `json:"model"`
	Messages []Message `json:"messages"`
	Tools    []Tool    `json:"tools,omitempty"`
	// ToolChoice is "none", "auto", "required" or a ToolChoice. It is
	// kept as it came, so that each translation refuses a malformed one
	// in its own terms.
	ToolChoice          json.RawMessage `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls,omitempty"`
	ResponseFormat      *ResponseFormat `json:"response_format,omitempty"`
	MaxTokens           *int64          `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	TopK                *int64          `json:"top_k,omitempty"`
	Stop                json.RawMessage `json:"stop,omitempty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty,omitempty"`
	PresencePenalty     *float64        `json:"presence_penalty,omitempty"`
	Seed                *int64          `json:"seed,omitempty"`
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       *StreamOptions  `json:"stream_options,omitempty"`
	User                string          `json:"user,omitempty"`

	ReasoningEffort      string `json:"reasoning_effort,omitempty"`
	Verbosity            string `json:"verbosity,omitempty"`
	ServiceTier          string `json:"service_tier,omitempty"`
	PromptCacheKey       string `json:"prompt_cache_key,omitempty"`
	PromptCacheRetention string `json:"prompt_cache_retention,omitempty"`
	SafetyIdentifier     string `json:"safety_identifier,omitempty"`

	// What a translation may have no form for, read to refuse it.
	N           *int     `json:"n,omitempty"`
	Logprobs    bool     `json:"logprobs,omitempty"`
	TopLogprobs *int     `json:"top_logprobs,omitempty"`
	Modalities  []string `json:"modalities,omitempty"`
	// Functions and FunctionCall are the older form of Tools and
	// ToolChoice.
	Functions    []Function      `json:"functions,omitempty"`
	FunctionCall json.RawMessage `json:"function_call,omitempty"`
	Audio        json.RawMessage `json:"audio,omitempty"`
	Prediction   json.RawMessage `json:"prediction,omitempty"`
}

// StreamOptions is a streamed request's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// IncludesUsage reports whether o asks for a usage chunk at the stream's
// end.
func (o *StreamOptions) IncludesUsage() bool { return o != nil && o.IncludeUsage }

// Message is a request's message.
type Message struct {
	Role    string  `json:"role"`
	Content Content `json:"content"`
	Name    string  `json:"name,omitempty"`
	Refusal string  `json:"refusal,omitempty"`
	// ToolCalls are an assistant's calls; ToolCallID is the call a tool
	// message answers.
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// FunctionCall is an assistant's call in the older form.
	FunctionCall *FunctionCall `json:"function_call,omitempty"`
	// ReasoningContent is the reasoning some Chat Completions upstreams
	// (DeepSeek, vLLM) answer beside the content.
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

// Content is a message's content: a string, an array of parts, or null.
// It is kept as it came, so that a translation reports a malformed one at
// its own place (messages[2].content); Parse and Text read it.
type Content json.RawMessage

// TextContent is s as a content.
func TextContent(s string) Content {
	return fastjson.AppendString(make([]byte, 0, len(s)+2), s)
}

// PartsContent is ps as a content.
func PartsContent(ps []Part) Content {
	if ps == nil {
		ps = []Part{}
	}
	b, _ := json.Marshal(ps) // plain values: cannot fail
	return b
}

// MarshalJSON writes c as it is; an empty c is null.
func (c Content) MarshalJSON() ([]byte, error) {
	if len(c) == 0 {
		return []byte("null"), nil
	}
	return c, nil
}

// UnmarshalJSON keeps a copy of b.
func (c *Content) UnmarshalJSON(b []byte) error {
	*c = append((*c)[:0], b...)
	return nil
}

// IsNull reports whether c is null or was not given.
func (c Content) IsNull() bool {
	b := bytes.TrimSpace(c)
	return len(b) == 0 || string(b) == "null"
}

// ErrContent is the error of a content that is neither a string, an
// array of parts nor null.
var ErrContent = errors.New("content must be a string, an array of parts or null")

// Parse reads c: a string is its text (parts nil), an array its parts
// (non-nil, even when empty), null neither.
func (c Content) Parse() (text string, parts []Part, err error) {
	b := bytes.TrimSpace(c)
	switch {
	case len(b) == 0 || string(b) == "null":
		return "", nil, nil
	case b[0] == '"':
		if s, ok := plainString(b); ok {
			return s, nil, nil
		}
		err = json.Unmarshal(b, &text)
		return text, nil, err
	case b[0] == '[':
		if err = json.Unmarshal(b, &parts); err != nil {
			return "", nil, err
		}
		if parts == nil {
			parts = []Part{}
		}
		return "", parts, nil
	}
	return "", nil, ErrContent
}

// plainString is the JSON string literal b's value when it has nothing
// to unescape or replace: no escapes, no control characters, valid
// UTF-8, as most answers' text is. It reads it as json.Unmarshal would,
// without its machinery.
func plainString(b []byte) (string, bool) {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return "", false
	}
	in := b[1 : len(b)-1]
	for _, c := range in {
		if c < 0x20 || c == '"' || c == '\\' {
			return "", false
		}
	}
	if !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
}

// Text is c's text: the string, or its text parts joined; "" for null
// or a content that does not parse.
func (c Content) Text() string {
	text, parts, _ := c.Parse()
	if parts == nil {
		return text
	}
	var sb strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			sb.WriteString(p.Text)
		}
	}
	return sb.String()
}

// Part is one part of a message's content.
type Part struct {
	Type       string      `json:"type"`
	Text       string      `json:"text,omitempty"`
	ImageURL   *ImageURL   `json:"image_url,omitempty"`
	InputAudio *InputAudio `json:"input_audio,omitempty"`
	File       *File       `json:"file,omitempty"`
	Refusal    string      `json:"refusal,omitempty"`
}

// MarshalJSON writes a text part's text even when it is empty: OpenAI
// requires it.
func (p Part) MarshalJSON() ([]byte, error) {
	if p.Type == "text" {
		return json.Marshal(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{p.Type, p.Text})
	}
	type plain Part
	return json.Marshal(plain(p))
}

// ImageURL is an image_url part's image.
type ImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// InputAudio is an input_audio part's audio.
type InputAudio struct {
	Data   string `json:"data"`
	Format string `json:"format"`
}

// File is a file part's file: given inline or by id.
type File struct {
	FileID   string `json:"file_id,omitempty"`
	FileData string `json:"file_data,omitempty"`
	Filename string `json:"filename,omitempty"`
}

// ToolCall is an assistant's call of a function tool.
type ToolCall struct {
	// Index is a streamed call's position among the message's; set in
	// stream deltas only.
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function FunctionCall `json:"function"`
	// ExtraContent is what a provider adds to a call (Gemini its thought
	// signature), kept as it came.
	ExtraContent json.RawMessage `json:"extra_content,omitempty"`
}

// FunctionCall is a call's function and its arguments, a JSON text kept
// as the model wrote it.
type FunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// Tool is a function tool.
type Tool struct {
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Function is a function tool's declaration. Description is a pointer so
// that an empty one given is passed on as given.
type Function struct {
	Name        string          `json:"name"`
	Description *string         `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// DescriptionText is f's description, "" when it has none.
func (f Function) DescriptionText() string {
	if f.Description == nil {
		return ""
	}
	return *f.Description
}

// ToolChoice is tool_choice's object form, one function by name. Its
// string forms ("none", "auto", "required") are plain strings.
type ToolChoice struct {
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
	Type string `json:"type"`
}

// FunctionChoice is the tool_choice of the function named.
func FunctionChoice(name string) ToolChoice {
	var c ToolChoice
	c.Type, c.Function.Name = "function", name
	return c
}

// ResponseFormat is response_format: "text", "json_object", or
// "json_schema" with its schema.
type ResponseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *JSONSchema `json:"json_schema,omitempty"`
}

// JSONSchema is a json_schema response format's schema.
type JSONSchema struct {
	Name        string          `json:"name"`
	Schema      json.RawMessage `json:"schema"`
	Description *string         `json:"description,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ChatCompletion is a chat.completion answer.
type ChatCompletion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   *Usage   `json:"usage,omitempty"`
	// ServiceTier is read only: the translations write none.
	ServiceTier string `json:"service_tier,omitempty"`
	// SystemFingerprint is left out when empty; Null writes null.
	SystemFingerprint json.RawMessage `json:"system_fingerprint,omitempty"`
}

// Null is JSON's null, for the raw fields written as null rather than
// left out.
var Null = json.RawMessage("null")

// Choice is one choice of an answer.
type Choice struct {
	Index   int           `json:"index"`
	Message AnswerMessage `json:"message"`
	// Logprobs is null unless an upstream answered some.
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

// AnswerMessage is an answer's message. Content is null when the answer
// is only tool calls, and Refusal, which OpenAI always writes, is null
// unless the model refused.
type AnswerMessage struct {
	Role             string     `json:"role"`
	Content          Content    `json:"content"`
	Refusal          *string    `json:"refusal"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
}

// ChatChunk is a chat.completion.chunk event of a streamed answer.
type ChatChunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	// SystemFingerprint is left out when empty; Null writes null.
	SystemFingerprint json.RawMessage `json:"system_fingerprint,omitempty"`
	Choices           []ChunkChoice   `json:"choices"`
	Usage             *Usage          `json:"usage,omitempty"`
	// ServiceTier is read only: the translations write none.
	ServiceTier string `json:"service_tier,omitempty"`
	// Error is an error event inside a stream, read only.
	Error *ErrorDetail `json:"error,omitempty"`
}

// ChunkChoice is one choice of a chunk.
type ChunkChoice struct {
	Index        int             `json:"index"`
	Delta        Delta           `json:"delta"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

// Delta is what a chunk adds to its choice's message.
type Delta struct {
	Role             string     `json:"role,omitempty"`
	Content          *string    `json:"content,omitempty"`
	Refusal          *string    `json:"refusal,omitempty"`
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

// Usage is an answer's usage. Cached input counts in PromptTokens, as
// OpenAI counts it, and again in the details, which are always written;
// the completion's details only by a translation that knows them.
type Usage struct {
	PromptTokens            int64                    `json:"prompt_tokens"`
	CompletionTokens        int64                    `json:"completion_tokens"`
	TotalTokens             int64                    `json:"total_tokens"`
	PromptTokensDetails     PromptTokensDetails      `json:"prompt_tokens_details"`
	CompletionTokensDetails *CompletionTokensDetails `json:"completion_tokens_details,omitempty"`
}

// PromptTokensDetails is what of the prompt was read from the cache.
type PromptTokensDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

// CompletionTokensDetails is what of the completion was reasoning.
type CompletionTokensDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}
