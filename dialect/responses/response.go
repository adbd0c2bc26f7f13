package responses

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/weir-gateway/weir/openaiwire"
)

// Response is the Responses API's response object, as a non-streamed
// answer and inside the streamed lifecycle events. Nullable fields are
// pointers, written as null as OpenAI writes them.
type Response struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"` // "response"
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"` // StatusInProgress, StatusCompleted, ...
	Background         bool               `json:"background"`
	Error              *ResponseError     `json:"error"`
	IncompleteDetails  *IncompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int64             `json:"max_output_tokens"`
	Model              string             `json:"model"`
	Output             []OutputItem       `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Reasoning          ReasoningEcho      `json:"reasoning"`
	ServiceTier        *string            `json:"service_tier"`
	// Store is always false: a translated response is kept nowhere.
	Store       bool              `json:"store"`
	Temperature *float64          `json:"temperature"`
	Text        TextConfig        `json:"text"`
	ToolChoice  json.RawMessage   `json:"tool_choice"`
	Tools       []json.RawMessage `json:"tools"`
	TopP        *float64          `json:"top_p"`
	Truncation  string            `json:"truncation"`
	Usage       *Usage            `json:"usage"`
	User        *string           `json:"user"`
	Metadata    map[string]string `json:"metadata"`
}

// A response's and an output item's statuses.
const (
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
	StatusIncomplete = "incomplete"
	StatusFailed     = "failed"
)

// ResponseError is why a response failed.
type ResponseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// IncompleteDetails is why a response is incomplete: "max_output_tokens"
// or "content_filter".
type IncompleteDetails struct {
	Reason string `json:"reason"`
}

// ReasoningEcho is the request's reasoning, as the response repeats it.
type ReasoningEcho struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

// OutputItem is one output item: a "message" (Role, Content) or a
// "function_call" (CallID, Name, Arguments).
type OutputItem struct {
	Type      string       `json:"type"`
	ID        string       `json:"id"`
	Status    string       `json:"status"`
	Role      string       `json:"role"`
	Content   []OutputPart `json:"content"`
	CallID    string       `json:"call_id"`
	Name      string       `json:"name"`
	Arguments string       `json:"arguments"`
}

// The output item types.
const (
	ItemMessage      = "message"
	ItemFunctionCall = "function_call"
)

// MarshalJSON writes the fields of the item's type only.
func (it OutputItem) MarshalJSON() ([]byte, error) {
	if it.Type == ItemFunctionCall {
		return json.Marshal(struct {
			ID        string `json:"id"`
			Type      string `json:"type"`
			Status    string `json:"status"`
			Arguments string `json:"arguments"`
			CallID    string `json:"call_id"`
			Name      string `json:"name"`
		}{it.ID, it.Type, it.Status, it.Arguments, it.CallID, it.Name})
	}
	content := it.Content
	if content == nil {
		content = []OutputPart{}
	}
	return json.Marshal(struct {
		ID      string       `json:"id"`
		Type    string       `json:"type"`
		Status  string       `json:"status"`
		Content []OutputPart `json:"content"`
		Role    string       `json:"role"`
	}{it.ID, it.Type, it.Status, content, it.Role})
}

// OutputPart is one part of an output message: "output_text" (Text) or
// "refusal" (Refusal).
type OutputPart struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	Refusal string `json:"refusal"`
}

// The output part types.
const (
	PartOutputText = "output_text"
	PartRefusal    = "refusal"
)

// MarshalJSON writes the fields of the part's type only; an output_text
// has no annotations or log probabilities to give, and says so.
func (p OutputPart) MarshalJSON() ([]byte, error) {
	if p.Type == PartRefusal {
		return json.Marshal(struct {
			Type    string `json:"type"`
			Refusal string `json:"refusal"`
		}{p.Type, p.Refusal})
	}
	return json.Marshal(struct {
		Type        string `json:"type"`
		Annotations []any  `json:"annotations"`
		Logprobs    []any  `json:"logprobs"`
		Text        string `json:"text"`
	}{p.Type, []any{}, []any{}, p.Text})
}

// Usage is a response's token usage.
type Usage struct {
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

// Translation is one request's answer on its way back: the request it
// answers, and the id and time its response carries.
type Translation struct {
	Req *Request
	// ID is the response's id, "resp_" and hex.
	ID string
	// CreatedAt is when the response was made, in Unix seconds.
	CreatedAt int64
	// NewID makes an item's id: prefix ("msg_", "fc_", "call_") and
	// something unique.
	NewID func(prefix string) string
}

// NewTranslation is the translation of req's answer, made at now, its ids
// random.
func NewTranslation(req *Request, now time.Time) *Translation {
	return &Translation{Req: req, ID: RandomID("resp_"), CreatedAt: now.Unix(), NewID: RandomID}
}

// RandomID is prefix and 48 random hex digits, as long as OpenAI's.
func RandomID(prefix string) string {
	var b [24]byte
	_, _ = rand.Read(b[:]) // never fails
	// Built in one allocation: ids are made for every answer and item.
	var id strings.Builder
	id.Grow(len(prefix) + hex.EncodedLen(len(b)))
	id.WriteString(prefix)
	const digits = "0123456789abcdef"
	for _, c := range b {
		id.WriteByte(digits[c>>4])
		id.WriteByte(digits[c&0x0f])
	}
	return id.String()
}

// response is the response object with what the request set, in
// progress and with no output yet.
func (t *Translation) response(model string) Response {
	r := t.Req
	if model == "" {
		model = r.Model
	}
	out := Response{
		ID: t.ID, Object: "response", CreatedAt: t.CreatedAt, Status: StatusInProgress,
		Instructions: r.Instructions, MaxOutputTokens: r.MaxOutputTokens, Model: model,
		Output:            []OutputItem{},
		ParallelToolCalls: r.ParallelToolCalls == nil || *r.ParallelToolCalls,
		Temperature:       r.Temperature, TopP: r.TopP,
		Text:       TextConfig{Format: &Format{Type: "text"}},
		ToolChoice: r.ToolChoice, Tools: []json.RawMessage{},
		Truncation: "disabled",
		Metadata:   r.Metadata,
	}
	if r.Text != nil {
		out.Text.Verbosity = r.Text.Verbosity
		if r.Text.Format != nil {
			out.Text.Format = r.Text.Format
		}
	}
	if len(out.ToolChoice) == 0 || string(out.ToolChoice) == "null" {
		out.ToolChoice = json.RawMessage(`"auto"`)
	}
	for _, tool := range r.Tools {
		out.Tools = append(out.Tools, tool.Raw)
	}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	if r.Reasoning != nil {
		out.Reasoning.Effort = r.Reasoning.Effort
		out.Reasoning.Summary = r.Reasoning.Summary
		if out.Reasoning.Summary == nil {
			out.Reasoning.Summary = r.Reasoning.GenerateSummary
		}
	}
	if r.User != "" {
		out.User = &r.User
	}
	if r.ServiceTier != "" {
		out.ServiceTier = &r.ServiceTier
	}
	return out
}

// finished sets resp's status from a Chat Completions finish reason: a
// length cut (max_output_tokens) or a content filter leaves it
// incomplete, anything else completed.
func finished(resp *Response, reason string) {
	resp.Status = StatusCompleted
	switch reason {
	case "length":
		resp.Status, resp.IncompleteDetails = StatusIncomplete, &IncompleteDetails{Reason: "max_output_tokens"}
	case "content_filter":
		resp.Status, resp.IncompleteDetails = StatusIncomplete, &IncompleteDetails{Reason: "content_filter"}
	}
}

// finishReason is a choice's finish_reason, "" for null.
func finishReason(r *string) string {
	if r == nil {
		return ""
	}
	return *r
}

// itemStatus is the status of an output item the model was writing when
// it finished for reason.
func itemStatus(reason string) string {
	if reason == "length" || reason == "content_filter" {
		return StatusIncomplete
	}
	return StatusCompleted
}

// FromChat is a non-streamed Chat Completions answer as the Response's
// JSON: the first choice's text and refusal as a message item, each of
// its tool calls as a function_call item (its id the call_id), the
// finish reason as the status, the usage in the Responses API's terms.
func (t *Translation) FromChat(body []byte) ([]byte, error) {
	var cc openaiwire.ChatCompletion
	if err := openaiwire.UnmarshalChatCompletion(body, &cc); err != nil {
		return nil, fmt.Errorf("the upstream's answer is not a chat completion: %w", err)
	}
	resp := t.response(cc.Model)
	if cc.ServiceTier != "" {
		// A copy: cc's own field would take cc to the heap.
		resp.ServiceTier = new(cc.ServiceTier)
	}
	resp.Status = StatusCompleted
	if len(cc.Choices) > 0 {
		ch := cc.Choices[0]
		var parts []OutputPart
		if text := ch.Message.Content.Text(); text != "" {
			parts = append(parts, OutputPart{Type: PartOutputText, Text: text})
		}
		if m := ch.Message; m.Refusal != nil && *m.Refusal != "" {
			parts = append(parts, OutputPart{Type: PartRefusal, Refusal: *m.Refusal})
		}
		if len(parts) > 0 {
			resp.Output = append(resp.Output, OutputItem{Type: ItemMessage, ID: t.NewID("msg_"), Status: StatusCompleted, Role: "assistant", Content: parts})
		}
		for _, tc := range ch.Message.ToolCalls {
			id := tc.ID
			if id == "" {
				id = t.NewID("call_")
			}
			resp.Output = append(resp.Output, OutputItem{Type: ItemFunctionCall, ID: t.NewID("fc_"), Status: StatusCompleted,
				CallID: id, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		if n := len(resp.Output); n > 0 {
			// The model was writing the last item when it stopped.
			resp.Output[n-1].Status = itemStatus(finishReason(ch.FinishReason))
		}
		finished(&resp, finishReason(ch.FinishReason))
	}
	resp.Usage = usageOf(cc.Usage)
	return resp.appendJSON(make([]byte, 0, 1024+len(body)))
}
