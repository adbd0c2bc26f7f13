package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/weir-gateway/weir/provider/mock"
)

// TestOfficialSDK drives the gateway with the official OpenAI Go SDK,
// unchanged but for its base URL and key: every endpoint, streaming, the
// model list, and an error the SDK must decode as OpenAI's.
func TestOfficialSDK(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{CompletionTokens: 8})
	g := startGateway(t, "", allKinds(up.URL))
	_, secret := g.createKey(t)
	client := openai.NewClient(
		option.WithBaseURL(g.URL+"/v1/"),
		option.WithAPIKey(secret),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(20*time.Second),
	)
	ctx := context.Background()

	chat, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")},
	})
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	if len(chat.Choices) != 1 || chat.Choices[0].Message.Content == "" || chat.Usage.TotalTokens == 0 {
		t.Fatalf("chat answer: %+v", chat)
	}

	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:         "chat",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		chunks++
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if chunks < 3 || len(acc.Choices) != 1 || acc.Choices[0].Message.Content == "" || acc.Usage.TotalTokens == 0 {
		t.Fatalf("stream: %d chunks, accumulated %+v", chunks, acc.ChatCompletion)
	}

	emb, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: "emb",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", "b"}},
	})
	if err != nil {
		t.Fatalf("embeddings: %v", err)
	}
	if len(emb.Data) != 2 || len(emb.Data[0].Embedding) == 0 {
		t.Fatalf("embeddings: %d vectors", len(emb.Data))
	}

	img, err := client.Images.Generate(ctx, openai.ImageGenerateParams{Model: "img", Prompt: "a weir"})
	if err != nil {
		t.Fatalf("images: %v", err)
	}
	if len(img.Data) != 1 || img.Data[0].B64JSON == "" {
		t.Fatalf("images: %+v", img.Data)
	}

	speech, err := client.Audio.Speech.New(ctx, openai.AudioSpeechNewParams{Model: "tts", Input: "hello", Voice: openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String("alloy")}})
	if err != nil {
		t.Fatalf("speech: %v", err)
	}
	audio, err := io.ReadAll(speech.Body)
	speech.Body.Close()
	if err != nil || len(audio) == 0 || !strings.HasPrefix(speech.Header.Get("Content-Type"), "audio/") {
		t.Fatalf("speech: %d bytes, %s, %v", len(audio), speech.Header.Get("Content-Type"), err)
	}

	page, err := client.Models.List(ctx)
	if err != nil {
		t.Fatalf("models: %v", err)
	}
	var names []string
	for _, m := range page.Data {
		names = append(names, m.ID)
	}
	if strings.Join(names, ",") != "chat,emb,img,tts" {
		t.Fatalf("models = %v", names)
	}

	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "no-such-model",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "not_found" {
		t.Fatalf("unknown model: %v", err)
	}
}

// TestOfficialSDKStructuredOutput: through the gateway, the official SDK
// gets JSON of the asked schema from the mock (whole and streamed), and a
// forced tool call whose streamed arguments its accumulator puts back
// together, as a structured-output client (generateObject,
// withStructuredOutput) needs.
func TestOfficialSDKStructuredOutput(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{})
	g := startGateway(t, "", allKinds(up.URL))
	_, secret := g.createKey(t)
	client := openai.NewClient(
		option.WithBaseURL(g.URL+"/v1/"),
		option.WithAPIKey(secret),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(20*time.Second),
	)
	ctx := context.Background()
	type step struct {
		Explanation string `json:"explanation"`
		Output      string `json:"output"`
	}
	type reasoning struct {
		Steps       []step `json:"steps"`
		FinalAnswer string `json:"final_answer"`
		Confidence  int    `json:"confidence"`
	}
	schema := map[string]any{
		"type": "object", "additionalProperties": false,
		"required": []string{"steps", "final_answer", "confidence"},
		"properties": map[string]any{
			"steps": map[string]any{"type": "array", "items": map[string]any{
				"type": "object", "additionalProperties": false, "required": []string{"explanation", "output"},
				"properties": map[string]any{"explanation": map[string]any{"type": "string"}, "output": map[string]any{"type": "string"}},
			}},
			"final_answer": map[string]any{"type": "string"},
			"confidence":   map[string]any{"type": "integer", "minimum": 1, "maximum": 5},
		},
	}
	params := openai.ChatCompletionNewParams{
		Model:    "chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Solve 8x + 7 = -23")},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "math_reasoning", Schema: schema, Strict: openai.Bool(true)},
		}},
	}
	chat, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	var whole reasoning
	if err := json.Unmarshal([]byte(chat.Choices[0].Message.Content), &whole); err != nil ||
		len(whole.Steps) == 0 || whole.Steps[0].Output == "" || whole.FinalAnswer == "" || whole.Confidence < 1 || whole.Confidence > 5 {
		t.Fatalf("structured answer %q: %+v, %v", chat.Choices[0].Message.Content, whole, err)
	}

	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if got := acc.Choices[0].Message.Content; got != chat.Choices[0].Message.Content {
		t.Errorf("streamed %q, whole %q", got, chat.Choices[0].Message.Content)
	}

	tool := openai.ChatCompletionNewParams{
		Model:    "chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Solve 8x + 7 = -23")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "math_reasoning", Parameters: schema,
		})},
		ToolChoice: openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "math_reasoning"}),
	}
	stream = client.Chat.Completions.NewStreaming(ctx, tool)
	acc = openai.ChatCompletionAccumulator{}
	var finished []openai.FinishedChatCompletionToolCall
	for stream.Next() {
		acc.AddChunk(stream.Current())
		if call, ok := acc.JustFinishedToolCall(); ok {
			finished = append(finished, call)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("tool stream: %v", err)
	}
	var args reasoning
	if len(finished) != 1 || finished[0].Name != "math_reasoning" || json.Unmarshal([]byte(finished[0].Arguments), &args) != nil ||
		len(args.Steps) == 0 || acc.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("tool calls %+v, finish %q", finished, acc.Choices[0].FinishReason)
	}
}

// TestOfficialSDKKeepsItsMaxWait: a call through the official SDK, with
// its default retries, that asks to wait at most 300ms while the model is
// busy ends in about that: the gateway's 503 queue_timeout tells the SDK
// not to retry it (x-should-retry: false), so it is sent once and not
// again after a Retry-After behind its caller's back.
func TestOfficialSDKKeepsItsMaxWait(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{})
	up.hold.Store(true)
	g := startGateway(t, "", oneModel(up.URL, "    concurrency: 1"))
	_, key := g.createKey(t)
	first := g.sendAsync(context.Background(), request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat")})
	waitFor(t, 5*time.Second, "the first request to reach the upstream", func() bool { return len(up.Arrivals()) == 1 })

	var sent atomic.Int32
	client := openai.NewClient(
		option.WithBaseURL(g.URL+"/v1/"),
		option.WithAPIKey(key),
		option.WithHeader("X-Weir-Max-Wait", "300ms"),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			sent.Add(1)
			return next(r)
		}),
	)
	start := time.Now()
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	took := time.Since(start)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable || apiErr.Code != "queue_timeout" {
		t.Fatalf("while busy: %v; want 503 queue_timeout", err)
	}
	if n := sent.Load(); n != 1 || took > 2*time.Second {
		t.Errorf("the SDK sent it %d times over %s; want once, in about the 300ms it asked for", n, took)
	}
	up.release(t)
	if rep := await(t, first); rep.Status != http.StatusOK {
		t.Errorf("the first request: status %d: %s", rep.Status, rep.Body)
	}
}
