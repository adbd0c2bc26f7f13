package mock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// Amazon Bedrock's Converse API: POST /model/{modelId}/converse answers
// JSON, POST /model/{modelId}/converse-stream answers the same as AWS
// event-stream messages. Errors carry Bedrock's shape: the exception's
// name in X-Amzn-ErrorType and {"message": ...}.

// converseRequest is the part of a Converse request the mock reads.
type converseRequest struct {
	Messages []converseMessage `json:"messages"`
	System   []struct {
		Text *string `json:"text"`
	} `json:"system"`
	InferenceConfig *struct {
		MaxTokens *int `json:"maxTokens"`
	} `json:"inferenceConfig"`
	ToolConfig *struct {
		Tools []struct {
			ToolSpec *struct {
				Name        string `json:"name"`
				InputSchema struct {
					JSON json.RawMessage `json:"json"`
				} `json:"inputSchema"`
			} `json:"toolSpec"`
		} `json:"tools"`
		ToolChoice *struct {
			Auto *struct{} `json:"auto"`
			Any  *struct{} `json:"any"`
			Tool *struct {
				Name string `json:"name"`
			} `json:"tool"`
		} `json:"toolChoice"`
	} `json:"toolConfig"`
	OutputConfig *struct {
		TextFormat *struct {
			Type      string `json:"type"`
			Structure struct {
				JSONSchema *struct {
					Schema string `json:"schema"`
				} `json:"jsonSchema"`
			} `json:"structure"`
		} `json:"textFormat"`
	} `json:"outputConfig"`
}

type converseMessage struct {
	Role    string `json:"role"`
	Content []struct {
		Text  *string `json:"text"`
		Image *struct {
			Format string `json:"format"`
			Source struct {
				Bytes      []byte `json:"bytes"`
				S3Location *struct {
					URI string `json:"uri"`
				} `json:"s3Location"`
			} `json:"source"`
		} `json:"image"`
		ToolUse *struct {
			ToolUseID string          `json:"toolUseId"`
			Name      string          `json:"name"`
			Input     json.RawMessage `json:"input"`
		} `json:"toolUse"`
		ToolResult *struct {
			ToolUseID string `json:"toolUseId"`
			Content   []struct {
				Text *string         `json:"text"`
				JSON json.RawMessage `json:"json"`
			} `json:"content"`
		} `json:"toolResult"`
	} `json:"content"`
}

// serveConverse routes /model/{modelId}/{operation}, and the same under
// /v1, so that a platform whose base URL is the mock's OpenAI root (as
// every platform of examples/weir.yaml is) reaches it too; the model id
// is path-escaped, as the SDKs send an ARN.
func (s *Server) serveConverse(w http.ResponseWriter, r *http.Request) {
	esc := strings.TrimPrefix(strings.TrimPrefix(r.URL.EscapedPath(), "/v1"), "/model/")
	i := strings.LastIndexByte(esc, '/')
	var model, op string
	if i > 0 {
		op = esc[i+1:]
		model, _ = url.PathUnescape(esc[:i])
	}
	stream := false
	switch op {
	case "converse":
	case "converse-stream":
		stream = true
	default:
		writeBedrockError(w, apiError{Status: http.StatusNotFound, Message: fmt.Sprintf("Unknown operation %s %s", r.Method, r.URL.Path)})
		return
	}
	if model == "" {
		writeBedrockError(w, apiError{Status: http.StatusNotFound, Message: "No model id in " + r.URL.Path})
		return
	}
	s.workAs(w, r, shapeBedrock, func(c *call) int { return s.converse(c, model, stream) })
}

// signed reports whether a request carries a SigV4 Authorization header
// (or a Bedrock API key as a bearer token). The signature itself is not
// checked: the mock does not know the secret.
func signed(h http.Header) bool {
	a := h.Get("Authorization")
	if tok, ok := strings.CutPrefix(a, "Bearer "); ok {
		return tok != ""
	}
	rest, ok := strings.CutPrefix(a, "AWS4-HMAC-SHA256 ")
	return ok && strings.Contains(rest, "Credential=") && strings.Contains(rest, "/bedrock/aws4_request") &&
		strings.Contains(rest, "SignedHeaders=") && strings.Contains(rest, "Signature=") && h.Get("X-Amz-Date") != ""
}

// converse serves one Converse or ConverseStream request.
func (s *Server) converse(c *call, model string, stream bool) int {
	if !signed(c.r.Header) {
		return c.fail(apiError{Status: http.StatusForbidden, Code: "MissingAuthenticationTokenException", Message: "Missing Authentication Token"})
	}
	var req converseRequest
	if err := json.Unmarshal(c.body, &req); err != nil {
		return c.fail(invalidRequest("", "Malformed input request: "+err.Error()))
	}
	o, err := parseOverrides(c.r.Header)
	if err != nil {
		return c.fail(invalidRequest("", err.Error()))
	}
	exception := c.r.Header.Get("X-Mock-Stream-Exception")
	if exception != "" && !streamExceptions[exception] {
		return c.fail(invalidRequest("", fmt.Sprintf("X-Mock-Stream-Exception must name a ConverseStream exception, such as throttlingException, not %q", exception)))
	}
	prompt, err := req.validate()
	if err != nil {
		return c.fail(invalidRequest("", err.Error()))
	}

	n := c.st.cfg.CompletionTokens
	if o.tokens > 0 {
		n = o.tokens
	}
	r := reply{tokens: n, finish: "end_turn", text: newTextAnswer(n)}
	tool, apiErr := req.forcedTool()
	if apiErr != nil {
		return c.fail(*apiErr)
	}
	var rf *responseFormat
	if oc := req.OutputConfig; oc != nil && oc.TextFormat != nil && oc.TextFormat.Structure.JSONSchema != nil {
		rf = &responseFormat{Type: "json_schema", JSONSchema: &struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		}{Name: "output", Schema: json.RawMessage(oc.TextFormat.Structure.JSONSchema.Schema)}}
	}
	if apiErr := r.structure(rf, tool, s.now); apiErr != nil {
		return c.fail(*apiErr)
	}
	if tool != nil {
		r.tool, r.finish = tool.Function.Name, "tool_use"
		r.callID = c.rand.appendID([]byte("tooluse_"), 22)
	} else if ic := req.InferenceConfig; ic != nil && ic.MaxTokens != nil {
		// A tool's input is whole JSON or nothing: only text is cut.
		if *ic.MaxTokens < 1 {
			return c.fail(invalidRequest("", "The maximum tokens you requested must be at least 1."))
		}
		if *ic.MaxTokens < r.tokens {
			r.tokens, r.finish = *ic.MaxTokens, "max_tokens"
		}
	}
	if status := s.begin(c, model, o); status != 0 {
		return status
	}
	started := s.now()
	reqID := c.rand.appendID(nil, 32)
	c.w.Header().Set("X-Amzn-Requestid", fmt.Sprintf("%s-%s-%s-%s-%s", reqID[:8], reqID[8:12], reqID[12:16], reqID[16:20], reqID[20:]))
	if !stream {
		if !wait(c.r.Context(), time.Duration(r.tokens)*c.st.interval) {
			return statusClientClosed
		}
		writeJSON(c.w, converseAnswer(&r, prompt, s.now().Sub(started)))
		return http.StatusOK
	}
	stall := o.stall == 1 || (o.stall == 0 && c.rand.chance(c.st.cfg.StallRate))
	stallFor := c.st.cfg.StallFor
	if o.stallFor > 0 {
		stallFor = o.stallFor
	}
	return s.converseStream(c, &r, prompt, exception, stall, stallFor, started)
}

// validate checks what Bedrock checks of a conversation and estimates its
// prompt's tokens: the mock's tokenizer over its texts, 85 an image.
func (req *converseRequest) validate() (prompt int, err error) {
	if len(req.Messages) == 0 {
		return 0, errors.New("A conversation must start with a user message. Try again with a conversation that starts with a user message.")
	}
	prompt = 3
	for _, s := range req.System {
		if s.Text != nil {
			prompt += estimateTokens(len(*s.Text))
		}
	}
	toolBlocks := false
	var uses map[string]bool // the tool uses of the last assistant message
	for i, m := range req.Messages {
		want := "user"
		if i%2 == 1 {
			want = "assistant"
		}
		if m.Role != want {
			if i == 0 {
				return 0, errors.New("A conversation must start with a user message. Try again with a conversation that starts with a user message.")
			}
			return 0, errors.New("A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again.")
		}
		if len(m.Content) == 0 {
			return 0, fmt.Errorf("The content field in the Message object at messages.%d is empty. Add a ContentBlock object to the content field and try again.", i)
		}
		prompt += 3
		next := map[string]bool{}
		for j, b := range m.Content {
			at := fmt.Sprintf("messages.%d.content.%d", i, j)
			members := 0
			switch {
			case b.Text != nil:
				members++
				if strings.TrimSpace(*b.Text) == "" {
					return 0, fmt.Errorf("The text field in the ContentBlock object at %s is blank. Add text to the text field, and try again.", at)
				}
				prompt += estimateTokens(len(*b.Text))
			}
			if b.Image != nil {
				members++
				switch b.Image.Format {
				case "png", "jpeg", "gif", "webp":
				default:
					return 0, fmt.Errorf("The format of the image at %s is not one of png, jpeg, gif, webp.", at)
				}
				if len(b.Image.Source.Bytes) == 0 && b.Image.Source.S3Location == nil {
					return 0, fmt.Errorf("The image at %s has no source.", at)
				}
				prompt += 85
			}
			if b.ToolUse != nil {
				members++
				toolBlocks = true
				if m.Role != "assistant" || b.ToolUse.ToolUseID == "" || b.ToolUse.Name == "" {
					return 0, fmt.Errorf("The toolUse block at %s needs an assistant message, a toolUseId and a name.", at)
				}
				next[b.ToolUse.ToolUseID] = true
				prompt += estimateTokens(len(b.ToolUse.Input))
			}
			if b.ToolResult != nil {
				members++
				toolBlocks = true
				if !uses[b.ToolResult.ToolUseID] {
					return 0, fmt.Errorf("The toolResult blocks at %s contain toolUseId %s, which matches no toolUse block of the previous turn.", at, b.ToolResult.ToolUseID)
				}
				for _, rc := range b.ToolResult.Content {
					if rc.Text != nil {
						prompt += estimateTokens(len(*rc.Text))
					}
					prompt += estimateTokens(len(rc.JSON))
				}
			}
			if members != 1 {
				return 0, fmt.Errorf("The ContentBlock object at %s must hold exactly one member.", at)
			}
		}
		uses = next
	}
	if req.Messages[len(req.Messages)-1].Role != "user" {
		return 0, errors.New("A conversation must end with a user message. Try again with a conversation that ends with a user message.")
	}
	if toolBlocks && req.ToolConfig == nil {
		return 0, errors.New("The toolConfig field must be defined when using toolUse and toolResult content blocks.")
	}
	return prompt, nil
}

// forcedTool is the tool the answer calls: the one toolChoice names, or
// the first with any; nil (auto, or no choice) is a text answer.
func (req *converseRequest) forcedTool() (*chatTool, *apiError) {
	tc := req.ToolConfig
	if tc == nil || tc.ToolChoice == nil || tc.ToolChoice.Auto != nil {
		return nil, nil
	}
	var specs []chatTool
	for _, t := range tc.Tools {
		if t.ToolSpec != nil {
			var ct chatTool
			ct.Type, ct.Function.Name, ct.Function.Parameters = "function", t.ToolSpec.Name, t.ToolSpec.InputSchema.JSON
			specs = append(specs, ct)
		}
	}
	switch {
	case tc.ToolChoice.Any != nil:
		if len(specs) == 0 {
			e := invalidRequest("", "toolChoice any needs a tool.")
			return nil, &e
		}
		return &specs[0], nil
	case tc.ToolChoice.Tool != nil:
		for i := range specs {
			if specs[i].Function.Name == tc.ToolChoice.Tool.Name {
				return &specs[i], nil
			}
		}
		e := invalidRequest("", "The tool "+tc.ToolChoice.Tool.Name+" that toolChoice names is not among the tools.")
		return nil, &e
	}
	return nil, nil
}

// converseAnswer is a Converse answer's JSON.
func converseAnswer(r *reply, prompt int, took time.Duration) []byte {
	var b []byte
	b = append(b, `{"output":{"message":{"role":"assistant","content":[`...)
	if r.tool == "" {
		b = append(b, `{"text":"`...)
		b = r.appendTokens(b, 0, r.tokens)
		b = append(b, `"}`...)
	} else {
		b = append(b, `{"toolUse":{"toolUseId":"`...)
		b = append(b, r.callID...)
		b = append(b, `","name":`...)
		b = appendJSONString(b, r.tool)
		b = append(b, `,"input":`...)
		for _, p := range r.pieces[:r.tokens] {
			b = append(b, p...)
		}
		b = append(b, `}}`...)
	}
	b = append(b, `]}},"stopReason":"`...)
	b = append(b, r.finish...)
	b = append(b, `","usage":`...)
	b = appendConverseUsage(b, prompt, r.tokens)
	b = append(b, `,"metrics":{"latencyMs":`...)
	b = fmt.Appendf(b, "%d", took.Milliseconds())
	return append(b, "}}\n"...)
}

func appendConverseUsage(b []byte, prompt, completion int) []byte {
	return fmt.Appendf(b, `{"inputTokens":%d,"outputTokens":%d,"totalTokens":%d}`, prompt, completion, prompt+completion)
}

// streamExceptions are the exceptions a ConverseStream may end with.
var streamExceptions = map[string]bool{
	"internalServerException": true, "modelStreamErrorException": true, "validationException": true,
	"throttlingException": true, "serviceUnavailableException": true,
}

// converseStream writes the answer as ConverseStream's events, framed as
// AWS event-stream messages: messageStart, a content block of one token a
// delta (opened by contentBlockStart for a tool use), contentBlockStop,
// messageStop and metadata. An exception, if asked for, replaces the
// second half of the tokens and ends the stream.
func (s *Server) converseStream(c *call, r *reply, prompt int, exception string, stall bool, stallFor time.Duration, started time.Time) int {
	h := c.w.Header()
	h.Set("Content-Type", "application/vnd.amazon.eventstream")
	c.w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(c.w)
	ctx := c.r.Context()
	enc := eventstream.NewEncoder()
	var buf bytes.Buffer
	event := func(typ string, payload []byte) {
		var m eventstream.Message
		m.Headers.Set(":event-type", eventstream.StringValue(typ))
		m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
		m.Headers.Set(":message-type", eventstream.StringValue("event"))
		m.Payload = payload
		_ = enc.Encode(&buf, m) // into a buffer: cannot fail
	}
	send := func() bool {
		if _, err := c.w.Write(buf.Bytes()); err != nil {
			return false
		}
		buf.Reset()
		err := rc.Flush()
		return err == nil || errors.Is(err, http.ErrNotSupported)
	}

	event("messageStart", []byte(`{"role":"assistant"}`))
	if r.tool != "" {
		p := []byte(`{"contentBlockIndex":0,"start":{"toolUse":{"toolUseId":"`)
		p = append(p, r.callID...)
		p = append(p, `","name":`...)
		p = appendJSONString(p, r.tool)
		event("contentBlockStart", append(p, `}}}`...))
	}
	n := r.tokens
	for i := 0; i < n; i++ {
		if (stall || exception != "") && i == n/2 {
			if exception != "" {
				var m eventstream.Message
				m.Headers.Set(":exception-type", eventstream.StringValue(exception))
				m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
				m.Headers.Set(":message-type", eventstream.StringValue("exception"))
				m.Payload = []byte(`{"message":"The mock provider ends this stream with ` + exception + `."}`)
				_ = enc.Encode(&buf, m)
				if !send() {
					return statusClientClosed
				}
				return http.StatusOK
			}
			if !s.stallStream(ctx, send, stallFor) {
				return statusClientClosed
			}
		}
		if c.st.interval > 0 && i > 0 {
			if !send() || !wait(ctx, c.st.interval) {
				return statusClientClosed
			}
		}
		var p []byte
		if r.tool == "" {
			p = append(p, `{"contentBlockIndex":0,"delta":{"text":"`...)
			p = r.appendTokens(p, i, i+1)
			p = append(p, `"}}`...)
		} else {
			p = append(p, `{"contentBlockIndex":0,"delta":{"toolUse":{"input":"`...)
			p = r.appendTokens(p, i, i+1)
			p = append(p, `"}}}`...)
		}
		event("contentBlockDelta", p)
	}
	event("contentBlockStop", []byte(`{"contentBlockIndex":0}`))
	event("messageStop", []byte(`{"stopReason":"`+r.finish+`"}`))
	meta := []byte(`{"usage":`)
	meta = appendConverseUsage(meta, prompt, n)
	meta = fmt.Appendf(meta, `,"metrics":{"latencyMs":%d}}`, s.now().Sub(started).Milliseconds())
	event("metadata", meta)
	if !send() {
		return statusClientClosed
	}
	return http.StatusOK
}

// bedrockExceptions name the exception Bedrock answers a status with.
var bedrockExceptions = map[int]string{
	http.StatusBadRequest:          "ValidationException",
	http.StatusUnauthorized:        "UnrecognizedClientException",
	http.StatusForbidden:           "AccessDeniedException",
	http.StatusNotFound:            "ResourceNotFoundException",
	http.StatusRequestTimeout:      "ModelTimeoutException",
	http.StatusFailedDependency:    "ModelErrorException",
	http.StatusTooManyRequests:     "ThrottlingException",
	http.StatusInternalServerError: "InternalServerException",
	http.StatusServiceUnavailable:  "ServiceUnavailableException",
}

// writeBedrockError writes e as Bedrock does: the exception's name in
// X-Amzn-ErrorType (e.Code, if it names one, or the status's) and its
// message in the body. Bedrock sends no Retry-After.
func writeBedrockError(w http.ResponseWriter, e apiError) {
	name := e.Code
	if !strings.HasSuffix(name, "Exception") {
		name = bedrockExceptions[e.Status]
	}
	if name == "" {
		name = "ValidationException"
		if e.Status >= 500 {
			name = "InternalServerException"
		}
	}
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h.Set("X-Amzn-Errortype", name)
	w.WriteHeader(e.Status)
	b, _ := json.Marshal(struct {
		Message string `json:"message"`
	}{e.Message}) // a string: cannot fail
	w.Write(append(b, '\n'))
}
