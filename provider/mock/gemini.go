package mock

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Gemini API's generateContent and streamGenerateContent (alt=sse),
// at /v1beta/models/{model}:{method} (and /v1/...), with the key in
// x-goog-api-key (or ?key=) and errors in Google's shape. Answers are the
// chat endpoint's: the same text, JSON of responseJsonSchema's shape, a
// function call forced by mode ANY, pacing, stalls and forced errors.

type geminiRequest struct {
	Contents []struct {
		Role  string       `json:"role"`
		Parts []geminiPart `json:"parts"`
	} `json:"contents"`
	SystemInstruction *struct {
		Parts []geminiPart `json:"parts"`
	} `json:"systemInstruction"`
	Tools []struct {
		FunctionDeclarations []struct {
			Name                 string          `json:"name"`
			Parameters           json.RawMessage `json:"parameters"`
			ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	ToolConfig *struct {
		FunctionCallingConfig *struct {
			Mode                 string   `json:"mode"`
			AllowedFunctionNames []string `json:"allowedFunctionNames"`
		} `json:"functionCallingConfig"`
	} `json:"toolConfig"`
	GenerationConfig *struct {
		MaxOutputTokens    *int            `json:"maxOutputTokens"`
		ResponseMimeType   string          `json:"responseMimeType"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
	} `json:"generationConfig"`
}

type geminiPart struct {
	Text             string           `json:"text"`
	InlineData       *json.RawMessage `json:"inlineData"`
	FileData         *json.RawMessage `json:"fileData"`
	FunctionCall     *json.RawMessage `json:"functionCall"`
	FunctionResponse *json.RawMessage `json:"functionResponse"`
	ThoughtSignature string           `json:"thoughtSignature"`
}

// geminiRoute reads a Gemini path: the model and whether it streams.
func geminiRoute(p string) (model, method string, ok bool) {
	for _, prefix := range []string{"/v1beta/models/", "/v1/models/", "/v1alpha/models/"} {
		if rest, found := strings.CutPrefix(p, prefix); found {
			model, method, ok = strings.Cut(rest, ":")
			return model, method, ok
		}
	}
	return "", "", false
}

// serveGemini routes one Gemini call.
func (s *Server) serveGemini(w http.ResponseWriter, r *http.Request, model, method string) {
	switch method {
	case "generateContent", "streamGenerateContent":
	default:
		writeGeminiError(w, apiError{Status: http.StatusNotFound, Message: fmt.Sprintf("Method %q is not found for models/%s.", method, model)}, 0)
		return
	}
	s.workAs(w, r, shapeGemini, func(c *call) int { return s.generate(c, model, method == "streamGenerateContent") })
}

// generate serves generateContent, or streamGenerateContent.
func (s *Server) generate(c *call, model string, stream bool) int {
	if c.r.Header.Get("X-Goog-Api-Key") == "" && c.r.URL.Query().Get("key") == "" {
		return c.fail(apiError{Status: http.StatusForbidden, Message: "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API."})
	}
	if key := c.r.Header.Get("X-Goog-Api-Key"); key == InvalidGeminiKey {
		return c.fail(apiError{Status: http.StatusBadRequest, Code: "API_KEY_INVALID", Message: "API key not valid. Please pass a valid API key."})
	}
	if stream && c.r.URL.Query().Get("alt") != "sse" {
		return c.fail(invalidRequest("", "The mock provider streams only with alt=sse."))
	}
	var req geminiRequest
	if err := json.Unmarshal(c.body, &req); err != nil {
		return c.fail(invalidRequest("", "Invalid JSON payload received. "+err.Error()))
	}
	o, err := parseOverrides(c.r.Header)
	if err != nil {
		return c.fail(invalidRequest("", err.Error()))
	}
	if len(req.Contents) == 0 {
		return c.fail(invalidRequest("", "* GenerateContentRequest.contents: contents is not specified"))
	}
	if apiErr := unsignedCall(&req); apiErr != nil {
		return c.fail(*apiErr)
	}
	n := c.st.cfg.CompletionTokens
	if o.tokens > 0 {
		n = o.tokens
	}
	r := reply{tokens: n, finish: `"STOP"`, text: newTextAnswer(n)}
	tool, apiErr := geminiForcedTool(&req)
	if apiErr != nil {
		return c.fail(*apiErr)
	}
	if apiErr := r.structure(geminiResponseFormat(&req), tool, s.now); apiErr != nil {
		return c.fail(*apiErr)
	}
	if tool != nil {
		r.tool = tool.Function.Name
		r.callID = c.rand.appendID([]byte("sig_"), 24) // the call's thought signature
	}
	if gc := req.GenerationConfig; gc != nil && gc.MaxOutputTokens != nil {
		if *gc.MaxOutputTokens < 1 {
			return c.fail(invalidRequest("", "* GenerateContentRequest.generation_config.max_output_tokens: must be positive"))
		}
		if *gc.MaxOutputTokens < r.tokens {
			r.tokens, r.finish = *gc.MaxOutputTokens, `"MAX_TOKENS"`
		}
	}
	prompt := geminiPromptTokens(&req)
	if status := s.begin(c, model, o); status != 0 {
		return status
	}
	id := c.rand.appendID(nil, 22)
	if !stream {
		return s.answerGemini(c, model, id, &r, prompt)
	}
	stall := o.stall == 1 || (o.stall == 0 && c.rand.chance(c.st.cfg.StallRate))
	stallFor := c.st.cfg.StallFor
	if o.stallFor > 0 {
		stallFor = o.stallFor
	}
	return s.streamGemini(c, model, string(id), &r, prompt, stall, stallFor)
}

// unsignedCall refuses, as Gemini 3 does, a model turn whose first
// function call comes back without its thought signature.
func unsignedCall(req *geminiRequest) *apiError {
	for i, ct := range req.Contents {
		for _, p := range ct.Parts {
			if p.FunctionCall != nil {
				if ct.Role == "model" && p.ThoughtSignature == "" {
					e := invalidRequest("", fmt.Sprintf("Function call is missing a thought_signature in functionCall parts. Content index %d.", i))
					return &e
				}
				break
			}
		}
	}
	return nil
}

// geminiResponseFormat is the chat endpoint's response_format for what
// req's generationConfig asks (JSON, of a schema if it gives one); nil
// for text.
func geminiResponseFormat(req *geminiRequest) *responseFormat {
	gc := req.GenerationConfig
	if gc == nil || gc.ResponseMimeType != "application/json" {
		return nil
	}
	rf := &responseFormat{Type: "json_object"}
	schema := gc.ResponseJSONSchema
	if len(schema) == 0 {
		schema = gc.ResponseSchema
	}
	if len(schema) > 0 {
		rf.Type = "json_schema"
		rf.JSONSchema = &struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		}{Name: "response", Schema: schema}
	}
	return rf
}

// answerGemini writes r whole, as generateContent answers, once the
// tokens' time has passed.
func (s *Server) answerGemini(c *call, model string, id []byte, r *reply, prompt int) int {
	if !wait(c.r.Context(), time.Duration(r.tokens)*c.st.interval) {
		return statusClientClosed
	}
	b := append([]byte(`{"candidates":[{"content":{"role":"model","parts":[`), geminiParts(r, 0, r.tokens)...)
	b = append(b, `]},"finishReason":`...)
	b = append(b, r.finish...)
	b = append(b, `,"index":0,"safetyRatings":`+geminiSafety+`}],"usageMetadata":`...)
	b = appendGeminiUsage(b, prompt, r.tokens)
	b = append(b, `,"modelVersion":`...)
	b = appendJSONString(b, model)
	b = append(b, `,"responseId":"`...)
	b = append(b, id...)
	b = append(b, "\"}\n"...)
	writeJSON(c.w, b)
	return http.StatusOK
}

// InvalidGeminiKey is the x-goog-api-key the mock refuses as Gemini
// refuses a key that is not valid (400, API_KEY_INVALID).
const InvalidGeminiKey = "invalid-key"

// geminiSafety is every candidate's safety ratings: all negligible.
const geminiSafety = `[{"category":"HARM_CATEGORY_HATE_SPEECH","probability":"NEGLIGIBLE"},{"category":"HARM_CATEGORY_DANGEROUS_CONTENT","probability":"NEGLIGIBLE"},{"category":"HARM_CATEGORY_HARASSMENT","probability":"NEGLIGIBLE"},{"category":"HARM_CATEGORY_SEXUALLY_EXPLICIT","probability":"NEGLIGIBLE"}]`

// geminiForcedTool is the function mode ANY makes the answer call: the
// first allowed, or the first declared.
func geminiForcedTool(req *geminiRequest) (*chatTool, *apiError) {
	tc := req.ToolConfig
	if tc == nil || tc.FunctionCallingConfig == nil || tc.FunctionCallingConfig.Mode != "ANY" {
		return nil, nil
	}
	var tools []chatTool
	for _, t := range req.Tools {
		for _, d := range t.FunctionDeclarations {
			var ct chatTool
			ct.Type, ct.Function.Name, ct.Function.Parameters = "function", d.Name, d.ParametersJSONSchema
			if len(ct.Function.Parameters) == 0 {
				ct.Function.Parameters = d.Parameters
			}
			tools = append(tools, ct)
		}
	}
	if len(tools) == 0 {
		e := invalidRequest("", "* GenerateContentRequest.tool_config.function_calling_config.mode: specified mode ANY but no function declarations.")
		return nil, &e
	}
	allowed := tc.FunctionCallingConfig.AllowedFunctionNames
	if len(allowed) == 0 {
		return &tools[0], nil
	}
	for i := range tools {
		if tools[i].Function.Name == allowed[0] {
			return &tools[i], nil
		}
	}
	e := invalidRequest("", "* GenerateContentRequest.tool_config.function_calling_config.allowed_function_names: function "+allowed[0]+" is not declared.")
	return nil, &e
}

// geminiParts writes tokens [from, to) of r as parts: text, or the whole
// function call (Gemini never splits one).
func geminiParts(r *reply, from, to int) []byte {
	var b []byte
	if r.tool == "" {
		b = append(b, `{"text":"`...)
		b = r.appendTokens(b, from, to)
		return append(b, `"}`...)
	}
	b = append(b, `{"functionCall":{"name":`...)
	b = appendJSONString(b, r.tool)
	b = append(b, `,"args":`...)
	for _, p := range r.pieces[from:to] {
		b = append(b, p...)
	}
	b = append(b, `},"thoughtSignature":"`...)
	b = append(b, r.callID...)
	return append(b, `"}`...)
}

func appendGeminiUsage(b []byte, prompt, candidates int) []byte {
	b = append(b, `{"promptTokenCount":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	if candidates > 0 {
		b = append(b, `,"candidatesTokenCount":`...)
		b = strconv.AppendInt(b, int64(candidates), 10)
	}
	b = append(b, `,"totalTokenCount":`...)
	b = strconv.AppendInt(b, int64(prompt+candidates), 10)
	return append(b, `,"promptTokensDetails":[{"modality":"TEXT","tokenCount":`+strconv.Itoa(prompt)+`}]}`...)
}

// geminiPromptTokens estimates a prompt as the chat endpoint does: 3
// tokens a turn plus 3, the text by its length, 258 tokens a medium
// (Gemini's count for an image).
func geminiPromptTokens(req *geminiRequest) int {
	total := 3
	count := func(parts []geminiPart) {
		for _, p := range parts {
			switch {
			case p.InlineData != nil || p.FileData != nil:
				total += 258
			case p.FunctionCall != nil:
				total += estimateTokens(len(*p.FunctionCall))
			case p.FunctionResponse != nil:
				total += estimateTokens(len(*p.FunctionResponse))
			default:
				total += estimateTokens(len(p.Text))
			}
		}
	}
	if req.SystemInstruction != nil {
		total += 3
		count(req.SystemInstruction.Parts)
	}
	for _, c := range req.Contents {
		total += 3
		count(c.Parts)
	}
	return total
}

// streamGemini writes the answer as streamGenerateContent's SSE events:
// a token an event (a function call whole, in one), each with the usage
// so far, the last with the finish reason and the whole usage. Events end
// in CRLF pairs, as Google's do.
func (s *Server) streamGemini(c *call, model, id string, r *reply, prompt int, stall bool, stallFor time.Duration) int {
	ctx := c.r.Context()
	var tail []byte
	tail = append(tail, `,"modelVersion":`...)
	tail = appendJSONString(tail, model)
	tail = append(tail, `,"responseId":"`...)
	tail = append(tail, id...)
	tail = append(tail, "\"}\r\n\r\n"...)
	var b []byte
	send := beginEvents(c, &b)
	events := r.tokens
	if r.tool != "" {
		events = 1
	}
	for i := 0; i < events; i++ {
		if stall && i == events/2 && i > 0 {
			if !s.stallStream(ctx, send, stallFor) {
				return statusClientClosed
			}
		}
		if c.st.interval > 0 && i > 0 {
			if !send() || !wait(ctx, c.st.interval) {
				return statusClientClosed
			}
		}
		from, to := i, i+1
		if r.tool != "" {
			from, to = 0, r.tokens
		}
		last := i == events-1
		b = append(b, `data: {"candidates":[{"content":{"role":"model","parts":[`...)
		b = append(b, geminiParts(r, from, to)...)
		b = append(b, `]}`...)
		used := to
		if last {
			b = append(b, `,"finishReason":`...)
			b = append(b, r.finish...)
			b = append(b, `,"safetyRatings":`+geminiSafety...)
			used = r.tokens
		}
		b = append(b, `,"index":0}],"usageMetadata":`...)
		b = appendGeminiUsage(b, prompt, used)
		b = append(b, tail...)
	}
	if events == 0 {
		b = append(b, `data: {"candidates":[{"content":{"role":"model","parts":[{"text":""}]},"finishReason":`...)
		b = append(b, r.finish...)
		b = append(b, `,"index":0}],"usageMetadata":`...)
		b = appendGeminiUsage(b, prompt, 0)
		b = append(b, tail...)
	}
	if !send() {
		return statusClientClosed
	}
	return http.StatusOK
}

// geminiStatuses are Google's status names for HTTP statuses.
var geminiStatuses = map[int]string{
	400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
	409: "ABORTED", 429: "RESOURCE_EXHAUSTED", 499: "CANCELLED", 500: "INTERNAL", 501: "NOT_IMPLEMENTED",
	503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
}

// writeGeminiError writes e in Google's shape: {"error": {code, message,
// status, details}}. A 429 says when to retry in a RetryInfo detail (and
// Retry-After); an error with a Code carries it as an ErrorInfo reason.
func writeGeminiError(w http.ResponseWriter, e apiError, retryAfter time.Duration) {
	status, ok := geminiStatuses[e.Status]
	if !ok {
		status = "UNKNOWN"
		if e.Status < 500 {
			status = "FAILED_PRECONDITION"
		}
	}
	type detail struct {
		Type       string `json:"@type"`
		RetryDelay string `json:"retryDelay,omitempty"`
		Reason     string `json:"reason,omitempty"`
		Domain     string `json:"domain,omitempty"`
	}
	var body struct {
		Error struct {
			Code    int      `json:"code"`
			Message string   `json:"message"`
			Status  string   `json:"status"`
			Details []detail `json:"details,omitempty"`
		} `json:"error"`
	}
	body.Error.Code, body.Error.Message, body.Error.Status = e.Status, e.Message, status
	if e.Code != "" && e.Status != http.StatusTooManyRequests {
		body.Error.Details = append(body.Error.Details, detail{Type: "type.googleapis.com/google.rpc.ErrorInfo", Reason: e.Code, Domain: "googleapis.com"})
	}
	if e.Status == http.StatusTooManyRequests {
		body.Error.Details = append(body.Error.Details, detail{Type: "type.googleapis.com/google.rpc.RetryInfo",
			RetryDelay: strconv.FormatFloat(max(retryAfter, time.Second).Seconds(), 'f', -1, 64) + "s"})
	}
	b, _ := json.Marshal(body) // strings and ints: cannot fail
	writeErrorBody(w, e.Status, append(b, '\n'), retryAfter)
}
