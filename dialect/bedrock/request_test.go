package bedrock

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/weir-gateway/weir/internal/jsontest"
)

// wire is the JSON body the SDK sends for in: what Bedrock receives.
func wire(t *testing.T, in *bedrockruntime.ConverseInput) string {
	t.Helper()
	var body []byte
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ = io.ReadAll(r.Body)
		w.Header().Set("X-Amzn-ErrorType", "ValidationException")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"message":"captured"}`)
	}))
	defer ts.Close()
	c := bedrockruntime.New(bedrockruntime.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(ts.URL), Retryer: aws.NopRetryer{},
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
	})
	if _, err := c.Converse(context.Background(), in); err == nil {
		t.Fatal("the capturing server answered no error")
	}
	return jsontest.Canonical(t, body)
}

func TestDecodeTranslatesToConverse(t *testing.T) {
	t.Parallel()
	const png = "iVBORw0KGgo=" // base64 of a PNG's signature
	cases := []struct {
		name, chat, converse string
		stream, usage        bool
	}{
		{
			name:     "plain text",
			chat:     `{"model":"anthropic.claude-3-haiku","messages":[{"role":"user","content":"Hi"}]}`,
			converse: `{"messages":[{"role":"user","content":[{"text":"Hi"}]}]}`,
		},
		{
			name: "system, developer, parts, sampling, stop",
			chat: `{"model":"m","messages":[
				{"role":"system","content":"Be brief."},
				{"role":"developer","content":[{"type":"text","text":"Answer in French."}]},
				{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,` + png + `"}},{"type":"image_url","image_url":{"url":"s3://bucket/cat.JPG"}}]}],
				"max_tokens":100,"max_completion_tokens":50,"temperature":0.5,"top_p":0.9,"stop":"END"}`,
			converse: `{"system":[{"text":"Be brief."},{"text":"Answer in French."}],
				"messages":[{"role":"user","content":[{"text":"What is this?"},
					{"image":{"format":"png","source":{"bytes":"` + png + `"}}},
					{"image":{"format":"jpeg","source":{"s3Location":{"uri":"s3://bucket/cat.JPG"}}}}]}],
				"inferenceConfig":{"maxTokens":50,"temperature":0.5,"topP":0.9,"stopSequences":["END"]}}`,
		},
		{
			name: "a tool round trip: calls with exact arguments, results merged into one user turn",
			chat: `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[
				{"role":"user","content":"Weather in Paris and Oslo?"},
				{"role":"assistant","content":"Let me look.","tool_calls":[
					{"id":"tooluse_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\",\"id\":12345678901234567890,\"f\":1.5}"}},
					{"id":"tooluse_2","type":"function","function":{"name":"weather","arguments":""}}]},
				{"role":"tool","tool_call_id":"tooluse_1","content":"18C"},
				{"role":"tool","tool_call_id":"tooluse_2","content":[{"type":"text","text":"9C"}]},
				{"role":"user","content":"Thanks"}],
				"tools":[{"type":"function","function":{"name":"weather","description":"Weather now","parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":true}}],
				"tool_choice":"auto","stop":["a","b"]}`,
			converse: `{"messages":[
				{"role":"user","content":[{"text":"Weather in Paris and Oslo?"}]},
				{"role":"assistant","content":[{"text":"Let me look."},
					{"toolUse":{"toolUseId":"tooluse_1","name":"weather","input":{"city":"Paris","id":12345678901234567890,"f":1.5}}},
					{"toolUse":{"toolUseId":"tooluse_2","name":"weather","input":{}}}]},
				{"role":"user","content":[
					{"toolResult":{"toolUseId":"tooluse_1","content":[{"text":"18C"}]}},
					{"toolResult":{"toolUseId":"tooluse_2","content":[{"text":"9C"}]}},
					{"text":"Thanks"}]}],
				"inferenceConfig":{"stopSequences":["a","b"]},
				"toolConfig":{"tools":[{"toolSpec":{"name":"weather","description":"Weather now","strict":true,
					"inputSchema":{"json":{"type":"object","properties":{"city":{"type":"string"}}}}}}],
					"toolChoice":{"auto":{}}}}`,
			stream: true, usage: true,
		},
		{
			name: "required is any; a tool without parameters gets an empty object schema",
			chat: `{"model":"m","messages":[{"role":"user","content":"x"}],
				"tools":[{"type":"function","function":{"name":"ping"}}],"tool_choice":"required"}`,
			converse: `{"messages":[{"role":"user","content":[{"text":"x"}]}],
				"toolConfig":{"tools":[{"toolSpec":{"name":"ping","inputSchema":{"json":{"type":"object","properties":{}}}}}],"toolChoice":{"any":{}}}}`,
		},
		{
			name: "a named function is tool",
			chat: `{"model":"m","messages":[{"role":"user","content":"x"}],
				"tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"b"}}],
				"tool_choice":{"type":"function","function":{"name":"b"}}}`,
			converse: `{"messages":[{"role":"user","content":[{"text":"x"}]}],
				"toolConfig":{"tools":[{"toolSpec":{"name":"a","inputSchema":{"json":{"type":"object","properties":{}}}}},
					{"toolSpec":{"name":"b","inputSchema":{"json":{"type":"object","properties":{}}}}}],
					"toolChoice":{"tool":{"name":"b"}}}}`,
		},
		{
			name: "none sends no tools",
			chat: `{"model":"m","messages":[{"role":"user","content":"x"}],
				"tools":[{"type":"function","function":{"name":"a"}}],"tool_choice":"none"}`,
			converse: `{"messages":[{"role":"user","content":[{"text":"x"}]}]}`,
		},
		{
			name: "none keeps the tools a conversation with tool calls needs",
			chat: `{"model":"m","messages":[{"role":"user","content":"x"},
				{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"a","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"t1","content":""}],
				"tools":[{"type":"function","function":{"name":"a"}}],"tool_choice":"none"}`,
			converse: `{"messages":[{"role":"user","content":[{"text":"x"}]},
				{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"a","input":{}}}]},
				{"role":"user","content":[{"toolResult":{"toolUseId":"t1","content":[{"text":""}]}}]}],
				"toolConfig":{"tools":[{"toolSpec":{"name":"a","inputSchema":{"json":{"type":"object","properties":{}}}}}]}}`,
		},
		{
			name: "json_schema is structured output",
			chat: `{"model":"m","messages":[{"role":"user","content":"x"}],
				"response_format":{"type":"json_schema","json_schema":{"name":"answer","description":"d","schema":{"type":"object", "properties":{"a":{"type":"integer"}}}}}}`,
			converse: `{"messages":[{"role":"user","content":[{"text":"x"}]}],
				"outputConfig":{"textFormat":{"type":"json_schema","structure":{"jsonSchema":{"name":"answer","description":"d",
					"schema":"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}"}}}}}`,
		},
		{
			name: "json_object is the schema of any object",
			chat: `{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}`,
			converse: `{"messages":[{"role":"user","content":[{"text":"x"}]}],
				"outputConfig":{"textFormat":{"type":"json_schema","structure":{"jsonSchema":{"schema":"{\"type\":\"object\"}"}}}}}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := Decode([]byte(tc.chat))
			if err != nil {
				t.Fatal(err)
			}
			if r.Stream != tc.stream || r.IncludeUsage != tc.usage {
				t.Errorf("stream %v include_usage %v, want %v %v", r.Stream, r.IncludeUsage, tc.stream, tc.usage)
			}
			jsontest.Equal(t, []byte(wire(t, &r.Input)), tc.converse)
			if *r.Input.ModelId != r.Model {
				t.Errorf("model id %q, model %q", *r.Input.ModelId, r.Model)
			}
			s := r.StreamInput()
			if s.ModelId != r.Input.ModelId || len(s.Messages) != len(r.Input.Messages) || s.ToolConfig != r.Input.ToolConfig ||
				s.InferenceConfig != r.Input.InferenceConfig || s.OutputConfig != r.Input.OutputConfig || len(s.System) != len(r.Input.System) {
				t.Errorf("the stream input differs from the input")
			}
		})
	}
}

func TestDecodeRefusesWhatConverseCannotDo(t *testing.T) {
	t.Parallel()
	msgs := `"messages":[{"role":"user","content":"x"}]`
	cases := []struct{ name, chat, param string }{
		{"not JSON", `{`, ""},
		{"no model", `{` + msgs + `}`, "model"},
		{"no messages", `{"model":"m","messages":[]}`, "messages"},
		{"empty messages", `{"model":"m","messages":[{"role":"user","content":""}]}`, "messages"},
		{"n", `{"model":"m",` + msgs + `,"n":2}`, "n"},
		{"logprobs", `{"model":"m",` + msgs + `,"logprobs":true}`, "logprobs"},
		{"top_logprobs", `{"model":"m",` + msgs + `,"top_logprobs":3}`, "top_logprobs"},
		{"audio", `{"model":"m",` + msgs + `,"audio":{"voice":"alloy","format":"mp3"}}`, "audio"},
		{"modalities", `{"model":"m",` + msgs + `,"modalities":["text","audio"]}`, "modalities"},
		{"prediction", `{"model":"m",` + msgs + `,"prediction":{"type":"content","content":"x"}}`, "prediction"},
		{"role", `{"model":"m","messages":[{"role":"function","content":"x"}]}`, "messages[0].role"},
		{"an http image", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`, "messages[0].content[0].image_url.url"},
		{"a tiff", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/tiff;base64,AAAA"}}]}]}`, "messages[0].content[0].image_url.url"},
		{"bad base64", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,%%%"}}]}]}`, "messages[0].content[0].image_url.url"},
		{"audio part", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]}`, "messages[0].content[0].type"},
		{"image in a system message", `{"model":"m","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"s3://b/a.png"}}]},{"role":"user","content":"x"}]}`, "messages[0].content[0].type"},
		{"tool result without id", `{"model":"m","messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id"},
		{"arguments not JSON", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{"}}]}]}`, "messages[0].tool_calls[0].function.arguments"},
		{"call without id", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "messages[0].tool_calls[0].id"},
		{"max_tokens 0", `{"model":"m",` + msgs + `,"max_tokens":0}`, "max_tokens"},
		{"stop not strings", `{"model":"m",` + msgs + `,"stop":3}`, "stop"},
		{"a built-in tool", `{"model":"m",` + msgs + `,"tools":[{"type":"web_search"}]}`, "tools[0].type"},
		{"required without tools", `{"model":"m",` + msgs + `,"tool_choice":"required"}`, "tool_choice"},
		{"a function not among the tools", `{"model":"m",` + msgs + `,"tools":[{"type":"function","function":{"name":"a"}}],"tool_choice":{"type":"function","function":{"name":"b"}}}`, "tool_choice"},
		{"a response format", `{"model":"m",` + msgs + `,"response_format":{"type":"grammar"}}`, "response_format.type"},
		{"a schema missing", `{"model":"m",` + msgs + `,"response_format":{"type":"json_schema","json_schema":{"name":"a"}}}`, "response_format.json_schema.schema"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Decode([]byte(tc.chat))
			var re *RequestError
			if !errors.As(err, &re) {
				t.Fatalf("error %v, want a *RequestError", err)
			}
			if re.Param != tc.param {
				t.Errorf("param %q, want %q (%v)", re.Param, tc.param, re)
			}
			if re.Message == "" {
				t.Error("no message")
			}
		})
	}
}
