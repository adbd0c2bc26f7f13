package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/weir-gateway/weir/provider/mock"
)

// TestUpstreamKinds: the official OpenAI SDK, unchanged, against models
// whose platforms speak other protocols — Gemini's generateContent,
// Azure OpenAI's deployment URLs, Anthropic's Messages API and Bedrock's
// Converse (signed by the AWS SDK), all served by the mock — plain and
// streamed, with usage.
func TestUpstreamKinds(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{CompletionTokens: 8})
	catalog := fmt.Sprintf(`platforms:
  - name: gem
    kind: gemini
    base_url: %[1]s/v1beta
    api_key_env: E2E_GEMINI_KEY
  - name: az
    kind: azure
    base_url: %[1]s
    api_key_env: E2E_AZURE_KEY
  - name: ant
    kind: anthropic
    base_url: %[1]s/v1
    api_key_env: E2E_ANTHROPIC_KEY
  - name: br
    kind: bedrock
    region: us-east-1
    base_url: %[1]s
    access_key_id_env: E2E_AWS_ID
    secret_access_key_env: E2E_AWS_SECRET
platform_models:
  - name: gem/flash
    platform: gem
    upstream: gemini-2.5-flash
  - name: az/mini
    platform: az
    upstream: gpt-4o-mini-deployment
  - name: ant/sonnet
    platform: ant
    upstream: claude-sonnet-4-5
  - name: br/nova
    platform: br
    upstream: amazon.nova-lite-v1:0
models:
  - name: gemini
    kind: chat
    candidates:
      - platform_model: gem/flash
  - name: azure
    kind: chat
    candidates:
      - platform_model: az/mini
  - name: anthropic
    kind: chat
    candidates:
      - platform_model: ant/sonnet
  - name: bedrock
    kind: chat
    candidates:
      - platform_model: br/nova
`, strings.TrimSuffix(up.URL, "/v1"))
	g := startGatewayEnv(t, []string{"E2E_GEMINI_KEY=gem-key", "E2E_AZURE_KEY=az-key", "E2E_ANTHROPIC_KEY=ant-key",
		"E2E_AWS_ID=AKIDEXAMPLE", "E2E_AWS_SECRET=wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}, "", catalog)
	_, secret := g.createKey(t)
	client := openai.NewClient(option.WithBaseURL(g.URL+"/v1/"), option.WithAPIKey(secret),
		option.WithMaxRetries(0), option.WithRequestTimeout(20*time.Second))
	ctx := context.Background()
	for _, model := range []string{"gemini", "azure", "anthropic", "bedrock"} {
		t.Run(model, func(t *testing.T) {
			chat, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
				Model:    model,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Say hello")},
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(chat.Choices) != 1 || chat.Choices[0].Message.Content == "" || chat.Usage.CompletionTokens == 0 || chat.Usage.PromptTokens == 0 {
				t.Fatalf("answer %+v; want one choice with text and usage", chat)
			}
			stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
				Model:         model,
				Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")},
				StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
			})
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if len(acc.Choices) != 1 || acc.Choices[0].Message.Content == "" || acc.Usage.CompletionTokens == 0 {
				t.Fatalf("streamed answer %+v; want text and usage", acc.ChatCompletion)
			}
		})
	}
}
