package gemini

import "encoding/json"

// Request is a generateContent request body.
type Request struct {
	Contents          []Content         `json:"contents"`
	SystemInstruction *Content          `json:"systemInstruction,omitempty"`
	Tools             []Tool            `json:"tools,omitempty"`
	ToolConfig        *ToolConfig       `json:"toolConfig,omitempty"`
	GenerationConfig  *GenerationConfig `json:"generationConfig,omitempty"`
	SafetySettings    []SafetySetting   `json:"safetySettings,omitempty"`
}

// Content is one turn: its role ("user" or "model"; none for a system
// instruction) and its parts.
type Content struct {
	Role  string `json:"role,omitempty"`
	Parts []Part `json:"parts"`
}

// The roles of a Content.
const (
	RoleUser  = "user"
	RoleModel = "model"
)

// Part is one piece of a turn; exactly one of its data fields is set.
type Part struct {
	Text string `json:"text,omitempty"`
	// Thought marks text that is the model's thinking, not its answer.
	Thought bool `json:"thought,omitempty"`
	// ThoughtSignature is the opaque token of the thinking behind the
	// part, to be sent back with it.
	ThoughtSignature string            `json:"thoughtSignature,omitempty"`
	InlineData       *Blob             `json:"inlineData,omitempty"`
	FileData         *FileData         `json:"fileData,omitempty"`
	FunctionCall     *FunctionCall     `json:"functionCall,omitempty"`
	FunctionResponse *FunctionResponse `json:"functionResponse,omitempty"`
}

// Blob is inline media: its MIME type and its bytes in base64.
type Blob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

// FileData is media by reference.
type FileData struct {
	MimeType string `json:"mimeType,omitempty"`
	FileURI  string `json:"fileUri"`
}

// FunctionCall is the model calling a declared function.
type FunctionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

// FunctionResponse is a function's result, sent back in a user turn.
type FunctionResponse struct {
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

// Tool is a set of functions the model may call.
type Tool struct {
	FunctionDeclarations []FunctionDeclaration `json:"functionDeclarations,omitempty"`
}

// FunctionDeclaration declares one function. Parameters is Gemini's own
// schema (a subset of OpenAPI's); ParametersJSONSchema takes JSON Schema
// as it is, which is what Chat Completions tools carry. They exclude each
// other.
type FunctionDeclaration struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description,omitempty"`
	Parameters           json.RawMessage `json:"parameters,omitempty"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

// ToolConfig says how the model may call functions.
type ToolConfig struct {
	FunctionCallingConfig *FunctionCallingConfig `json:"functionCallingConfig,omitempty"`
}

// FunctionCallingConfig: Mode is one of the Mode constants;
// AllowedFunctionNames, with ModeAny, limits the calls to those named.
type FunctionCallingConfig struct {
	Mode                 string   `json:"mode,omitempty"`
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

// The function calling modes.
const (
	// ModeAuto: the model answers in text or calls a function.
	ModeAuto = "AUTO"
	// ModeAny: the model calls a function.
	ModeAny = "ANY"
	// ModeNone: the model calls none.
	ModeNone = "NONE"
)

// GenerationConfig holds the sampling and output settings. ResponseSchema
// is Gemini's own schema; ResponseJSONSchema takes JSON Schema as it is.
// Both need ResponseMimeType "application/json".
type GenerationConfig struct {
	Temperature        *float64        `json:"temperature,omitempty"`
	TopP               *float64        `json:"topP,omitempty"`
	TopK               *int64          `json:"topK,omitempty"`
	MaxOutputTokens    *int64          `json:"maxOutputTokens,omitempty"`
	StopSequences      []string        `json:"stopSequences,omitempty"`
	CandidateCount     *int            `json:"candidateCount,omitempty"`
	PresencePenalty    *float64        `json:"presencePenalty,omitempty"`
	FrequencyPenalty   *float64        `json:"frequencyPenalty,omitempty"`
	Seed               *int64          `json:"seed,omitempty"`
	ResponseMimeType   string          `json:"responseMimeType,omitempty"`
	ResponseSchema     json.RawMessage `json:"responseSchema,omitempty"`
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema,omitempty"`
}

// SafetySetting sets the blocking threshold of one harm category.
type SafetySetting struct {
	Category  string `json:"category"`
	Threshold string `json:"threshold"`
}

// Response is a generateContent answer, and each event of a
// streamGenerateContent stream.
type Response struct {
	Candidates     []Candidate     `json:"candidates,omitempty"`
	PromptFeedback *PromptFeedback `json:"promptFeedback,omitempty"`
	UsageMetadata  *UsageMetadata  `json:"usageMetadata,omitempty"`
	ModelVersion   string          `json:"modelVersion,omitempty"`
	ResponseID     string          `json:"responseId,omitempty"`
}

// Candidate is one answer of the model.
type Candidate struct {
	Content       *Content       `json:"content,omitempty"`
	FinishReason  string         `json:"finishReason,omitempty"`
	SafetyRatings []SafetyRating `json:"safetyRatings,omitempty"`
	Index         int            `json:"index"`
	FinishMessage string         `json:"finishMessage,omitempty"`
}

// SafetyRating is how likely a candidate or prompt is to be harmful in
// one category; Blocked says the rating blocked it.
type SafetyRating struct {
	Category    string `json:"category"`
	Probability string `json:"probability"`
	Blocked     bool   `json:"blocked,omitempty"`
}

// PromptFeedback says why a prompt got no candidates (BlockReason set).
type PromptFeedback struct {
	BlockReason   string         `json:"blockReason,omitempty"`
	SafetyRatings []SafetyRating `json:"safetyRatings,omitempty"`
}

// UsageMetadata counts an answer's tokens. CandidatesTokenCount leaves
// out the thinking, ThoughtsTokenCount; TotalTokenCount has both, the
// prompt and ToolUsePromptTokenCount. CachedContentTokenCount is the part
// of the prompt read from the cache.
type UsageMetadata struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount,omitempty"`
	TotalTokenCount         int64 `json:"totalTokenCount,omitempty"`
	CachedContentTokenCount int64 `json:"cachedContentTokenCount,omitempty"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount,omitempty"`
	ToolUsePromptTokenCount int64 `json:"toolUsePromptTokenCount,omitempty"`
}

// The finish reasons Gemini gives.
const (
	FinishStop                  = "STOP"
	FinishMaxTokens             = "MAX_TOKENS"
	FinishSafety                = "SAFETY"
	FinishRecitation            = "RECITATION"
	FinishLanguage              = "LANGUAGE"
	FinishOther                 = "OTHER"
	FinishBlocklist             = "BLOCKLIST"
	FinishProhibitedContent     = "PROHIBITED_CONTENT"
	FinishSPII                  = "SPII"
	FinishMalformedFunctionCall = "MALFORMED_FUNCTION_CALL"
	FinishImageSafety           = "IMAGE_SAFETY"
	FinishUnexpectedToolCall    = "UNEXPECTED_TOOL_CALL"
	FinishTooManyToolCalls      = "TOO_MANY_TOOL_CALLS"
)

// ErrorBody is Gemini's error answer: {"error": {code, message, status,
// details}}.
type ErrorBody struct {
	Error struct {
		Code    int           `json:"code"`
		Message string        `json:"message"`
		Status  string        `json:"status"`
		Details []ErrorDetail `json:"details,omitempty"`
	} `json:"error"`
}

// ErrorDetail is one of an error's details; RetryDelay is a RetryInfo's
// ("37s"), Reason an ErrorInfo's ("API_KEY_INVALID").
type ErrorDetail struct {
	Type       string `json:"@type"`
	RetryDelay string `json:"retryDelay,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// RetryInfoType is the @type of the detail that says when to retry.
const RetryInfoType = "type.googleapis.com/google.rpc.RetryInfo"
