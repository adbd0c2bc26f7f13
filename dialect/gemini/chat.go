package gemini

import "encoding/json"

// The parts of OpenAI's Chat Completions that the translations read and
// write.

// chatRequest is a Chat Completions request. Fields it does not name are
// either ignored (hints such as user, store, metadata) or refused (see
// refused).
type chatRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	TopK                *int            `json:"top_k"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	Stop                json.RawMessage `json:"stop"`
	N                   *int            `json:"n"`
	PresencePenalty     *float64        `json:"presence_penalty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty"`
	Seed                *int64          `json:"seed"`
	ResponseFormat      *chatFormat     `json:"response_format"`
	Tools               []chatTool      `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	// Functions and FunctionCall are the older form of tools.
	Functions    []chatFunction  `json:"functions"`
	FunctionCall json.RawMessage `json:"function_call"`
	Logprobs     bool            `json:"logprobs"`
	Modalities   []string        `json:"modalities"`
	Audio        json.RawMessage `json:"audio"`
	Prediction   json.RawMessage `json:"prediction"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role string `json:"role"`
	// Content is a string, an array of parts, or null.
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  []chatToolCall  `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	// FunctionCall is an assistant's call in the older form.
	FunctionCall *chatFunctionCall `json:"function_call,omitempty"`
}

type chatPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
	InputAudio *struct {
		Data   string `json:"data"`
		Format string `json:"format"`
	} `json:"input_audio"`
	File *struct {
		FileData string `json:"file_data"`
		FileID   string `json:"file_id"`
	} `json:"file"`
	Refusal string `json:"refusal"`
}

type chatToolCall struct {
	// Index is set in stream deltas only.
	Index        *int             `json:"index,omitempty"`
	ID           string           `json:"id,omitempty"`
	Type         string           `json:"type,omitempty"`
	Function     chatFunctionCall `json:"function"`
	ExtraContent *extraContent    `json:"extra_content,omitempty"`
}

// extraContent carries what a provider adds to a tool call: Gemini's
// thought signature.
type extraContent struct {
	Google *struct {
		ThoughtSignature string `json:"thought_signature,omitempty"`
	} `json:"google,omitempty"`
}

func signatureExtra(sig string) *extraContent {
	if sig == "" {
		return nil
	}
	e := &extraContent{Google: &struct {
		ThoughtSignature string `json:"thought_signature,omitempty"`
	}{ThoughtSignature: sig}}
	return e
}

func (e *extraContent) signature() string {
	if e == nil || e.Google == nil {
		return ""
	}
	return e.Google.ThoughtSignature
}

type chatFunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

type chatFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
	} `json:"json_schema"`
}

// chatCompletion is a chat.completion answer.
type chatCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	Choices           []chatChoice `json:"choices"`
	Usage             *chatUsage   `json:"usage,omitempty"`
	SystemFingerprint *string      `json:"system_fingerprint"`
}

type chatChoice struct {
	Index        int             `json:"index"`
	Message      chatAnswer      `json:"message"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

// chatAnswer is an answer's message. Content is null when the answer
// is only tool calls.
type chatAnswer struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	Refusal   *string        `json:"refusal"`
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
}

type chatUsage struct {
	PromptTokens            int64         `json:"prompt_tokens"`
	CompletionTokens        int64         `json:"completion_tokens"`
	TotalTokens             int64         `json:"total_tokens"`
	PromptTokensDetails     promptDetails `json:"prompt_tokens_details"`
	CompletionTokensDetails outputDetails `json:"completion_tokens_details"`
}

type promptDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

type outputDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// chatChunk is a chat.completion.chunk event.
type chatChunk struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	Created           int64             `json:"created"`
	Model             string            `json:"model"`
	SystemFingerprint *string           `json:"system_fingerprint"`
	Choices           []chatChunkChoice `json:"choices"`
	Usage             *chatUsage        `json:"usage,omitempty"`
}

type chatChunkChoice struct {
	Index        int             `json:"index"`
	Delta        chatDelta       `json:"delta"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

type chatDelta struct {
	Role      string         `json:"role,omitempty"`
	Content   *string        `json:"content,omitempty"`
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
}
