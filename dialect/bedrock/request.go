package bedrock

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	smithydocument "github.com/aws/smithy-go/document"
	"github.com/weir-gateway/weir/openaiwire"
)

// Request is a Chat Completions request translated for Converse.
type Request struct {
	// Model is the request's model: the Bedrock model id (or inference
	// profile, or ARN) the gateway put there.
	Model string
	// Stream: the client asked for a stream (ConverseStream).
	Stream bool
	// IncludeUsage: the stream ends with a usage chunk of its own, as
	// stream_options.include_usage asks.
	IncludeUsage bool
	Input        bedrockruntime.ConverseInput
}

// StreamInput is the request for ConverseStream.
func (r *Request) StreamInput() *bedrockruntime.ConverseStreamInput {
	in := &r.Input
	return &bedrockruntime.ConverseStreamInput{
		ModelId:         in.ModelId,
		Messages:        in.Messages,
		System:          in.System,
		InferenceConfig: in.InferenceConfig,
		ToolConfig:      in.ToolConfig,
		OutputConfig:    in.OutputConfig,
	}
}

// RequestError is a request that cannot be translated: the client's to
// fix, answered 400 with Param named.
type RequestError struct {
	Param   string
	Message string
}

func (e *RequestError) Error() string {
	if e.Param == "" {
		return e.Message
	}
	return e.Param + ": " + e.Message
}

func invalid(param, format string, args ...any) *RequestError {
	return &RequestError{Param: param, Message: fmt.Sprintf(format, args...)}
}

// Decode translates a Chat Completions request body. An error is a
// *RequestError.
func Decode(body []byte) (*Request, error) {
	var cr openaiwire.ChatRequest
	if err := json.Unmarshal(body, &cr); err != nil {
		return nil, invalid("", "the body is not a Chat Completions request: %v", err)
	}
	if err := refuse(&cr); err != nil {
		return nil, err
	}
	if cr.Model == "" {
		return nil, invalid("model", "required")
	}
	r := &Request{
		Model:        cr.Model,
		Stream:       cr.Stream,
		IncludeUsage: cr.StreamOptions.IncludesUsage(),
	}
	r.Input.ModelId = &cr.Model
	var err error
	var toolBlocks bool
	if r.Input.System, r.Input.Messages, toolBlocks, err = conversation(cr.Messages); err != nil {
		return nil, err
	}
	if r.Input.InferenceConfig, err = inference(&cr); err != nil {
		return nil, err
	}
	if r.Input.ToolConfig, err = toolConfig(cr.Tools, cr.ToolChoice, toolBlocks); err != nil {
		return nil, err
	}
	if r.Input.OutputConfig, err = outputConfig(cr.ResponseFormat); err != nil {
		return nil, err
	}
	return r, nil
}

// refuse names what Converse cannot do that the request asks for.
func refuse(cr *openaiwire.ChatRequest) error {
	switch {
	case cr.N != nil && *cr.N > 1:
		return invalid("n", "Bedrock answers with one choice; n must be 1")
	case cr.Logprobs:
		return invalid("logprobs", "Bedrock's Converse API has no log probabilities")
	case cr.TopLogprobs != nil && *cr.TopLogprobs > 0:
		return invalid("top_logprobs", "Bedrock's Converse API has no log probabilities")
	case len(cr.Audio) > 0 && string(cr.Audio) != "null":
		return invalid("audio", "Bedrock's Converse API answers in text only")
	case len(cr.Prediction) > 0 && string(cr.Prediction) != "null":
		return invalid("prediction", "Bedrock's Converse API has no predicted outputs")
	}
	for _, m := range cr.Modalities {
		if m != "text" {
			return invalid("modalities", "Bedrock's Converse API answers in text only, not %q", m)
		}
	}
	return nil
}

// conversation splits the messages into Converse's system blocks and its
// messages, which alternate: consecutive messages of one role (a tool's
// results and the user's next words, say) are merged into one. It
// reports whether any message holds a tool use or result.
func conversation(msgs []openaiwire.Message) (system []types.SystemContentBlock, out []types.Message, toolBlocks bool, err error) {
	if len(msgs) == 0 {
		return nil, nil, false, invalid("messages", "at least one message is required")
	}
	add := func(role types.ConversationRole, blocks []types.ContentBlock) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			return
		}
		out = append(out, types.Message{Role: role, Content: blocks})
	}
	for i, m := range msgs {
		param := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "developer":
			texts, err := textsOf(m.Content, param+".content")
			if err != nil {
				return nil, nil, false, err
			}
			for _, t := range texts {
				system = append(system, &types.SystemContentBlockMemberText{Value: t})
			}
		case "user":
			blocks, err := userBlocks(m.Content, param+".content")
			if err != nil {
				return nil, nil, false, err
			}
			add(types.ConversationRoleUser, blocks)
		case "assistant":
			texts, err := textsOf(m.Content, param+".content")
			if err != nil {
				return nil, nil, false, err
			}
			var blocks []types.ContentBlock
			for _, t := range texts {
				blocks = append(blocks, &types.ContentBlockMemberText{Value: t})
			}
			for j, tc := range m.ToolCalls {
				b, err := toolUse(tc, fmt.Sprintf("%s.tool_calls[%d]", param, j))
				if err != nil {
					return nil, nil, false, err
				}
				blocks = append(blocks, b)
				toolBlocks = true
			}
			add(types.ConversationRoleAssistant, blocks)
		case "tool":
			if m.ToolCallID == "" {
				return nil, nil, false, invalid(param+".tool_call_id", "required")
			}
			texts, err := textsOf(m.Content, param+".content")
			if err != nil {
				return nil, nil, false, err
			}
			result := types.ToolResultBlock{ToolUseId: &m.ToolCallID}
			for _, t := range texts {
				result.Content = append(result.Content, &types.ToolResultContentBlockMemberText{Value: t})
			}
			if len(result.Content) == 0 {
				// Converse wants a result's content; an empty result is
				// an empty text.
				result.Content = []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: ""}}
			}
			add(types.ConversationRoleUser, []types.ContentBlock{&types.ContentBlockMemberToolResult{Value: result}})
			toolBlocks = true
		default:
			return nil, nil, false, invalid(param+".role", "Bedrock takes system, developer, user, assistant and tool messages, not %q", m.Role)
		}
	}
	if len(out) == 0 {
		return nil, nil, false, invalid("messages", "no message has any content")
	}
	return system, out, toolBlocks, nil
}

// textsOf is the non-empty texts of a content that may hold text only: a
// string, or an array of text parts.
func textsOf(content openaiwire.Content, param string) ([]string, error) {
	s, parts, err := contentOf(content, param)
	if err != nil {
		return nil, err
	}
	if parts == nil {
		if s == "" {
			return nil, nil
		}
		return []string{s}, nil
	}
	var texts []string
	for j, p := range parts {
		if p.Type != "text" {
			return nil, invalid(fmt.Sprintf("%s[%d].type", param, j), "only text parts are allowed here, not %q", p.Type)
		}
		if p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return texts, nil
}

// contentOf reads a content: a string (parts nil), an array of parts
// (parts non-nil), or null (both empty).
func contentOf(content openaiwire.Content, param string) (s string, parts []openaiwire.Part, err error) {
	s, parts, err = content.Parse()
	switch {
	case errors.Is(err, openaiwire.ErrContent):
		return "", nil, invalid(param, "a string or an array of parts")
	case err != nil:
		return "", nil, invalid(param, "%v", err)
	}
	return s, parts, nil
}

// userBlocks is a user message's content: text and images.
func userBlocks(content openaiwire.Content, param string) ([]types.ContentBlock, error) {
	s, parts, err := contentOf(content, param)
	if err != nil {
		return nil, err
	}
	if parts == nil {
		if s == "" {
			return nil, nil
		}
		return []types.ContentBlock{&types.ContentBlockMemberText{Value: s}}, nil
	}
	var blocks []types.ContentBlock
	for j, p := range parts {
		pp := fmt.Sprintf("%s[%d]", param, j)
		switch p.Type {
		case "text":
			if p.Text != "" {
				blocks = append(blocks, &types.ContentBlockMemberText{Value: p.Text})
			}
		case "image_url":
			if p.ImageURL == nil {
				return nil, invalid(pp+".image_url", "required")
			}
			b, err := image(p.ImageURL.URL, pp+".image_url.url")
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, b)
		default:
			return nil, invalid(pp+".type", "Bedrock takes text and image_url parts, not %q", p.Type)
		}
	}
	return blocks, nil
}

// imageFormats maps an image's media type, and a file's extension, to
// Converse's format.
var imageFormats = map[string]types.ImageFormat{
	"image/png": types.ImageFormatPng, "image/jpeg": types.ImageFormatJpeg, "image/jpg": types.ImageFormatJpeg,
	"image/gif": types.ImageFormatGif, "image/webp": types.ImageFormatWebp,
	".png": types.ImageFormatPng, ".jpeg": types.ImageFormatJpeg, ".jpg": types.ImageFormatJpeg,
	".gif": types.ImageFormatGif, ".webp": types.ImageFormatWebp,
}

// image is an image part: a base64 data: URL sent inline, or an s3://
// URI that Bedrock reads itself. Bedrock fetches no http(s) URL.
func image(url, param string) (types.ContentBlock, error) {
	switch {
	case strings.HasPrefix(url, "data:"):
		meta, data, ok := strings.Cut(url[len("data:"):], ",")
		media, isBase64 := strings.CutSuffix(meta, ";base64")
		if !ok || !isBase64 {
			return nil, invalid(param, "a data: URL must be base64 (data:image/png;base64,...)")
		}
		format, ok := imageFormats[strings.ToLower(media)]
		if !ok {
			return nil, invalid(param, "Bedrock takes png, jpeg, gif and webp images, not %q", media)
		}
		raw, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return nil, invalid(param, "the image's base64 does not decode: %v", err)
		}
		return &types.ContentBlockMemberImage{Value: types.ImageBlock{Format: format, Source: &types.ImageSourceMemberBytes{Value: raw}}}, nil
	case strings.HasPrefix(url, "s3://"):
		format, ok := imageFormats[strings.ToLower(path.Ext(url))]
		if !ok {
			return nil, invalid(param, "an s3:// image must end in .png, .jpg, .jpeg, .gif or .webp")
		}
		return &types.ContentBlockMemberImage{Value: types.ImageBlock{Format: format, Source: &types.ImageSourceMemberS3Location{Value: types.S3Location{Uri: &url}}}}, nil
	}
	return nil, invalid(param, "Bedrock fetches no image URL: send the image inline as a base64 data: URL, or as an s3:// URI")
}

// toolUse is an assistant's tool call, its arguments JSON as a document.
func toolUse(tc openaiwire.ToolCall, param string) (types.ContentBlock, error) {
	switch {
	case tc.Type != "" && tc.Type != "function":
		return nil, invalid(param+".type", "Bedrock calls functions only, not %q", tc.Type)
	case tc.ID == "":
		return nil, invalid(param+".id", "required")
	case tc.Function.Name == "":
		return nil, invalid(param+".function.name", "required")
	}
	args := tc.Function.Arguments
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	input, err := jsonDocument([]byte(args))
	if err != nil {
		return nil, invalid(param+".function.arguments", "not JSON: %v", err)
	}
	return &types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{ToolUseId: &tc.ID, Name: &tc.Function.Name, Input: input}}, nil
}

// jsonDocument is JSON as a document of the SDK's, its numbers kept
// exact: the SDK writes a json.Number as a string, a document.Number as
// the number it is.
func jsonDocument(js []byte) (document.Interface, error) {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return document.NewLazyDocument(exactNumbers(v)), nil
}

func exactNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		return smithydocument.Number(x)
	case map[string]any:
		for k, e := range x {
			x[k] = exactNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = exactNumbers(e)
		}
	}
	return v
}

// inference is the sampling settings.
func inference(cr *openaiwire.ChatRequest) (*types.InferenceConfiguration, error) {
	var ic types.InferenceConfiguration
	set := false
	limit, param := cr.MaxCompletionTokens, "max_completion_tokens"
	if limit == nil {
		limit, param = cr.MaxTokens, "max_tokens"
	}
	if limit != nil {
		if *limit < 1 || *limit > math.MaxInt32 {
			return nil, invalid(param, "must be from 1 to %d", math.MaxInt32)
		}
		n := int32(*limit)
		ic.MaxTokens, set = &n, true
	}
	if cr.Temperature != nil {
		ic.Temperature, set = ptr(float32(*cr.Temperature)), true
	}
	if cr.TopP != nil {
		ic.TopP, set = ptr(float32(*cr.TopP)), true
	}
	if stop := bytes.TrimSpace(cr.Stop); len(stop) > 0 && string(stop) != "null" {
		var one string
		if json.Unmarshal(stop, &one) == nil {
			ic.StopSequences = []string{one}
		} else if err := json.Unmarshal(stop, &ic.StopSequences); err != nil {
			return nil, invalid("stop", "a string or an array of strings")
		}
		set = set || len(ic.StopSequences) > 0
	}
	if !set {
		return nil, nil
	}
	return &ic, nil
}

// toolConfig is the tools and the choice among them. Converse has no
// "none": it is sent as no tools, unless the conversation holds tool
// uses or results, which Converse accepts only beside the tools.
func toolConfig(tools []openaiwire.Tool, choiceJSON json.RawMessage, toolBlocks bool) (*types.ToolConfiguration, error) {
	var tc types.ToolConfiguration
	names := map[string]bool{}
	for i, t := range tools {
		param := fmt.Sprintf("tools[%d]", i)
		if t.Type != "function" && t.Type != "" {
			return nil, invalid(param+".type", "Bedrock calls functions only, not %q tools", t.Type)
		}
		f := t.Function
		if f.Name == "" {
			return nil, invalid(param+".function.name", "required")
		}
		schema := f.Parameters
		if len(bytes.TrimSpace(schema)) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		doc, err := jsonDocument(schema)
		if err != nil {
			return nil, invalid(param+".function.parameters", "not JSON: %v", err)
		}
		spec := types.ToolSpecification{Name: &f.Name, InputSchema: &types.ToolInputSchemaMemberJson{Value: doc}, Strict: f.Strict}
		if f.DescriptionText() != "" {
			spec.Description = f.Description
		}
		tc.Tools = append(tc.Tools, &types.ToolMemberToolSpec{Value: spec})
		names[f.Name] = true
	}

	choiceJSON = bytes.TrimSpace(choiceJSON)
	if len(choiceJSON) == 0 || string(choiceJSON) == "null" {
		if len(tc.Tools) == 0 {
			return nil, nil
		}
		return &tc, nil
	}
	var mode string
	if json.Unmarshal(choiceJSON, &mode) == nil {
		switch mode {
		case "auto":
			if len(tc.Tools) == 0 {
				return nil, nil
			}
			tc.ToolChoice = &types.ToolChoiceMemberAuto{}
		case "required":
			if len(tc.Tools) == 0 {
				return nil, invalid("tool_choice", "\"required\" needs tools")
			}
			tc.ToolChoice = &types.ToolChoiceMemberAny{}
		case "none":
			if !toolBlocks || len(tc.Tools) == 0 {
				return nil, nil
			}
		default:
			return nil, invalid("tool_choice", "none, auto, required or a function, not %q", mode)
		}
		return &tc, nil
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(choiceJSON, &named); err != nil || named.Type != "function" {
		return nil, invalid("tool_choice", "Bedrock takes none, auto, required or {\"type\": \"function\", ...}")
	}
	if !names[named.Function.Name] {
		return nil, invalid("tool_choice", "function %q is not among the tools", named.Function.Name)
	}
	tc.ToolChoice = &types.ToolChoiceMemberTool{Value: types.SpecificToolChoice{Name: &named.Function.Name}}
	return &tc, nil
}

// outputConfig is response_format: a JSON schema is Converse's own
// structured output; json_object is the schema of any object.
func outputConfig(rf *openaiwire.ResponseFormat) (*types.OutputConfig, error) {
	if rf == nil {
		return nil, nil
	}
	var def types.JsonSchemaDefinition
	switch rf.Type {
	case "", "text":
		return nil, nil
	case "json_object":
		def.Schema = ptr(`{"type":"object"}`)
	case "json_schema":
		js := rf.JSONSchema
		if js == nil || len(bytes.TrimSpace(js.Schema)) == 0 || string(js.Schema) == "null" {
			return nil, invalid("response_format.json_schema.schema", "required")
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, js.Schema); err != nil {
			return nil, invalid("response_format.json_schema.schema", "not JSON: %v", err)
		}
		def.Schema = ptr(compact.String())
		if js.Name != "" {
			def.Name = &js.Name
		}
		if js.Description != nil && *js.Description != "" {
			def.Description = js.Description
		}
	default:
		return nil, invalid("response_format.type", "text, json_object or json_schema, not %q", rf.Type)
	}
	return &types.OutputConfig{TextFormat: &types.OutputFormat{
		Type:      types.OutputFormatTypeJsonSchema,
		Structure: &types.OutputFormatStructureMemberJsonSchema{Value: def},
	}}, nil
}

func ptr[T any](v T) *T { return &v }
