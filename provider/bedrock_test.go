package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/provider/mock"
)

// received is one request as the upstream saw it.
type received struct {
	path, rawPath string
	header        http.Header
	body          []byte
}

// bedrockBundle is a Bedrock adapter in front of the mock provider, with
// what the mock received.
type bedrockBundle struct {
	ad     *Bedrock
	mock   *mock.Server
	url    string
	mu     sync.Mutex
	got    []received
	header http.Header // set on every request before the mock sees it
	served chan struct{}
}

func (b *bedrockBundle) last(t *testing.T) received {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.got) == 0 {
		t.Fatal("the mock received nothing")
	}
	return b.got[len(b.got)-1]
}

func setupBedrock(t *testing.T, cfg mock.Config, edit func(*BedrockConfig)) *bedrockBundle {
	t.Helper()
	return setupBedrockOver(t, httptest.NewServer, cfg, edit)
}

// setupBedrockOver is setupBedrock on a server of newServer's, such as
// httptest.NewTLSServer: a bearer token goes over HTTPS only.
func setupBedrockOver(t *testing.T, newServer func(http.Handler) *httptest.Server, cfg mock.Config, edit func(*BedrockConfig)) *bedrockBundle {
	t.Helper()
	b := &bedrockBundle{mock: mock.New(cfg), header: http.Header{}, served: make(chan struct{}, 64)}
	ts := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		b.got = append(b.got, received{path: r.URL.Path, rawPath: r.URL.EscapedPath(), header: r.Header.Clone(), body: body})
		for k, v := range b.header {
			r.Header[k] = v
		}
		b.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		b.mock.ServeHTTP(w, r)
		b.served <- struct{}{}
	}))
	t.Cleanup(ts.Close)
	b.url = ts.URL
	c := BedrockConfig{Region: "eu-west-3", BaseURL: ts.URL, AccessKeyID: "AKIDBEDROCKTEST", SecretAccessKey: "secret", Client: ts.Client()}
	if edit != nil {
		edit(&c)
	}
	ad, err := NewBedrock(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	b.ad = ad
	return b
}

func (b *bedrockBundle) setHeader(k, v string) {
	b.mu.Lock()
	b.header.Set(k, v)
	b.mu.Unlock()
}

// jsonOf decodes JSON into a generic value, failing the test if it is not.
func jsonOf(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	return m
}

func sameJSONValue(t *testing.T, what string, got any, want string) {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Errorf("%s\n got: %s\nwant: %s", what, gb, wb)
	}
}

const mockText = "This is a mock answer. That's all." // the mock's 7 tokens

func TestBedrockConverse(t *testing.T) {
	t.Parallel()
	b := setupBedrock(t, mock.Config{CompletionTokens: 7}, nil)
	resp, err := b.ad.Do(t.Context(), Call{Path: "/chat/completions", Body: []byte(`{"model":"anthropic.claude-3-haiku-20240307-v1:0",
		"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello"}],"max_tokens":50,"temperature":0.2}`)})
	if err != nil {
		t.Fatal(err)
	}
	got := b.last(t)
	if got.rawPath != "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse" {
		t.Errorf("path %s", got.rawPath)
	}
	auth := got.header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDBEDROCKTEST/") || !strings.Contains(auth, "/eu-west-3/bedrock/aws4_request") {
		t.Errorf("Authorization %q is not SigV4 with the platform's key and region", auth)
	}
	if got.header.Get("Amz-Sdk-Request") != "attempt=1; max=1" {
		t.Errorf("the SDK may retry: %q", got.header.Get("Amz-Sdk-Request"))
	}
	sameJSONValue(t, "the Converse request", jsonOf(t, got.body), `{"system":[{"text":"Be brief."}],
		"messages":[{"role":"user","content":[{"text":"Hello"}]}],"inferenceConfig":{"maxTokens":50,"temperature":0.2}}`)

	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "application/json" {
		t.Errorf("status %d, Content-Type %q", resp.StatusCode, ct)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ContentLength != int64(len(body)) {
		t.Errorf("Content-Length %d for %d bytes", resp.ContentLength, len(body))
	}
	a := jsonOf(t, body)
	id, _ := a["id"].(string)
	if !strings.HasPrefix(id, "chatcmpl-") || len(id) != len("chatcmpl-")+36 {
		t.Errorf("id %q is not named by Bedrock's request id", id)
	}
	delete(a, "id")
	delete(a, "created")
	// 3, 3 for the system text, 3 + 2 for the message.
	sameJSONValue(t, "the answer", a, `{"object":"chat.completion","model":"anthropic.claude-3-haiku-20240307-v1:0",
		"choices":[{"index":0,"message":{"role":"assistant","content":"`+mockText+`","refusal":null},"logprobs":null,"finish_reason":"stop"}],
		"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18,"prompt_tokens_details":{"cached_tokens":0}}}`)
}

const weatherTools = `"tools":[{"type":"function","function":{"name":"weather","description":"Weather now",
	"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`

// TestBedrockToolRoundTrip calls a tool, then sends its result back: the
// call's id is Bedrock's toolUseId both ways, which the mock checks.
func TestBedrockToolRoundTrip(t *testing.T) {
	t.Parallel()
	b := setupBedrock(t, mock.Config{CompletionTokens: 7}, nil)
	resp, err := b.ad.Do(t.Context(), Call{Path: "/chat/completions", Body: []byte(`{"model":"m",
		"messages":[{"role":"user","content":"Weather in Paris?"}],` + weatherTools + `,"tool_choice":"required"}`)})
	if err != nil {
		t.Fatal(err)
	}
	sameJSONValue(t, "the tool config sent", jsonOf(t, b.last(t).body)["toolConfig"], `{"tools":[{"toolSpec":{"name":"weather","description":"Weather now",
		"inputSchema":{"json":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}}],"toolChoice":{"any":{}}}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var a struct {
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID, Type string
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatal(err)
	}
	ch := a.Choices[0]
	if ch.FinishReason != "tool_calls" || ch.Message.Content != nil || len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("answer %s", body)
	}
	call := ch.Message.ToolCalls[0]
	var args struct{ City string }
	if !strings.HasPrefix(call.ID, "tooluse_") || call.Type != "function" || call.Function.Name != "weather" ||
		json.Unmarshal([]byte(call.Function.Arguments), &args) != nil || args.City == "" {
		t.Fatalf("tool call %+v", call)
	}

	next, _ := json.Marshal(map[string]any{
		"model": "m",
		"messages": []any{
			map[string]any{"role": "user", "content": "Weather in Paris?"},
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
				"id": call.ID, "type": "function", "function": map[string]any{"name": "weather", "arguments": call.Function.Arguments}}}},
			map[string]any{"role": "tool", "tool_call_id": call.ID, "content": "18C and sunny"},
		},
		"tools": json.RawMessage(strings.TrimPrefix(weatherTools, `"tools":`)),
	})
	resp, err = b.ad.Do(t.Context(), Call{Path: "/chat/completions", Body: next})
	if err != nil {
		t.Fatal(err)
	}
	sent := jsonOf(t, b.last(t).body)
	sameJSONValue(t, "the conversation sent", sent["messages"], `[{"role":"user","content":[{"text":"Weather in Paris?"}]},
		{"role":"assistant","content":[{"toolUse":{"toolUseId":"`+call.ID+`","name":"weather","input":`+call.Function.Arguments+`}}]},
		{"role":"user","content":[{"toolResult":{"toolUseId":"`+call.ID+`","content":[{"text":"18C and sunny"}]}}]}]`)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	a.Choices = nil
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatal(err)
	}
	if ch := a.Choices[0]; ch.FinishReason != "stop" || ch.Message.Content == nil || *ch.Message.Content != mockText {
		t.Errorf("the result was not answered in text: %s", body)
	}
}

// sse splits a whole SSE body into its data payloads.
func sse(t *testing.T, body []byte) []string {
	t.Helper()
	s := string(body)
	if !strings.HasSuffix(s, "\n\n") {
		t.Fatalf("the stream does not end an event: %q", s)
	}
	var out []string
	for _, ev := range strings.Split(strings.TrimSuffix(s, "\n\n"), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok {
			t.Fatalf("bad SSE event %q", ev)
		}
		out = append(out, data)
	}
	return out
}

func TestBedrockConverseStream(t *testing.T) {
	t.Parallel()
	b := setupBedrock(t, mock.Config{CompletionTokens: 7}, nil)
	resp, err := b.ad.Do(t.Context(), Call{Path: "/chat/completions", Stream: true,
		Body: []byte(`{"model":"amazon.nova-lite-v1:0","stream":true,"messages":[{"role":"user","content":"Hello"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.last(t); got.rawPath != "/model/amazon.nova-lite-v1%3A0/converse-stream" {
		t.Errorf("path %s", got.rawPath)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	evs := sse(t, body)
	if evs[len(evs)-1] != "[DONE]" {
		t.Fatalf("last event %q", evs[len(evs)-1])
	}
	var text strings.Builder
	var id string
	for i, ev := range evs[:len(evs)-1] {
		c := jsonOf(t, []byte(ev))
		if c["object"] != "chat.completion.chunk" || c["model"] != "amazon.nova-lite-v1:0" {
			t.Errorf("chunk %d: %s", i, ev)
		}
		if id == "" {
			id, _ = c["id"].(string)
		} else if c["id"] != id {
			t.Errorf("chunk %d id %v, the first's %s", i, c["id"], id)
		}
		ch := c["choices"].([]any)[0].(map[string]any)
		d := ch["delta"].(map[string]any)
		switch i {
		case 0:
			sameJSONValue(t, "the role chunk", d, `{"role":"assistant","content":""}`)
		case len(evs) - 2:
			sameJSONValue(t, "the finish chunk", ch, `{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}`)
			sameJSONValue(t, "the usage", c["usage"], `{"prompt_tokens":8,"completion_tokens":7,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":0}}`)
		default:
			text.WriteString(d["content"].(string))
			if ch["finish_reason"] != nil {
				t.Errorf("chunk %d finishes: %s", i, ev)
			}
		}
	}
	if text.String() != mockText || len(evs) != 7+3 {
		t.Errorf("%d events making %q", len(evs), text.String())
	}
}

func TestBedrockConverseStreamToolCallAndUsageChunk(t *testing.T) {
	t.Parallel()
	b := setupBedrock(t, mock.Config{}, nil)
	resp, err := b.ad.Do(t.Context(), Call{Path: "/chat/completions", Stream: true, Body: []byte(`{"model":"m","stream":true,
		"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Weather?"}],` + weatherTools + `,
		"tool_choice":{"type":"function","function":{"name":"weather"}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	sameJSONValue(t, "the tool choice sent", jsonOf(t, b.last(t).body)["toolConfig"].(map[string]any)["toolChoice"], `{"tool":{"name":"weather"}}`)
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	evs := sse(t, body)
	n := len(evs)
	if n < 5 || evs[n-1] != "[DONE]" {
		t.Fatalf("events %q", evs)
	}
	first := jsonOf(t, []byte(evs[1]))["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
	call := first["tool_calls"].([]any)[0].(map[string]any)
	fn := call["function"].(map[string]any)
	if call["index"] != 0.0 || !strings.HasPrefix(call["id"].(string), "tooluse_") || call["type"] != "function" || fn["name"] != "weather" || fn["arguments"] != "" {
		t.Errorf("the call's first chunk %s", evs[1])
	}
	var args strings.Builder
	for _, ev := range evs[2 : n-3] {
		d := jsonOf(t, []byte(ev))["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
		tc := d["tool_calls"].([]any)[0].(map[string]any)
		if tc["index"] != 0.0 || tc["id"] != nil {
			t.Errorf("argument chunk %s", ev)
		}
		args.WriteString(tc["function"].(map[string]any)["arguments"].(string))
	}
	var in struct{ City string }
	if err := json.Unmarshal([]byte(args.String()), &in); err != nil || in.City == "" {
		t.Errorf("the arguments make %q (%v)", args.String(), err)
	}
	finish := jsonOf(t, []byte(evs[n-3]))
	if finish["choices"].([]any)[0].(map[string]any)["finish_reason"] != "tool_calls" || finish["usage"] != nil {
		t.Errorf("finish chunk %s", evs[n-3])
	}
	usage := jsonOf(t, []byte(evs[n-2]))
	if len(usage["choices"].([]any)) != 0 || usage["usage"].(map[string]any)["completion_tokens"].(float64) < 1 {
		t.Errorf("usage chunk %s", evs[n-2])
	}
}

func TestBedrockErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status     string
		want       int
		retryable  bool
		credential bool
		retryAfter time.Duration
		code       string
	}{
		{"429", http.StatusTooManyRequests, true, false, throttleRetryAfter, ""},
		{"503", http.StatusServiceUnavailable, true, false, 0, ""},
		{"500", http.StatusInternalServerError, true, false, 0, ""},
		{"424", http.StatusBadGateway, true, false, 0, ""},
		{"403", http.StatusForbidden, true, true, 0, ""},
		{"401", http.StatusUnauthorized, true, true, 0, ""},
		{"400", http.StatusBadRequest, false, false, 0, "ValidationException"},
		{"404", http.StatusNotFound, false, false, 0, "ResourceNotFoundException"},
	}
	for _, tc := range cases {
		t.Run(tc.status, func(t *testing.T) {
			t.Parallel()
			for _, stream := range []bool{false, true} {
				b := setupBedrock(t, mock.Config{}, nil)
				b.setHeader("X-Mock-Status", tc.status)
				_, err := b.ad.Do(t.Context(), Call{Path: "/chat/completions", Stream: stream,
					Body: []byte(`{"model":"m","messages":[{"role":"user","content":"x"}]}`)})
				var pe *Error
				if !errors.As(err, &pe) {
					t.Fatalf("stream %v: error %v, want an *Error", stream, err)
				}
				if pe.Status != tc.want || pe.Retryable() != tc.retryable || pe.Credential != tc.credential || pe.RetryAfter != tc.retryAfter {
					t.Errorf("stream %v: %+v; want status %d retryable %v credential %v retry after %s", stream, pe, tc.want, tc.retryable, tc.credential, tc.retryAfter)
				}
				if tc.code == "" {
					if pe.Credential && pe.Body != nil {
						t.Errorf("a credential refusal kept its body: %s", pe.Body)
					}
					continue
				}
				e := jsonOf(t, pe.Body)["error"].(map[string]any)
				if e["type"] != "invalid_request_error" || e["code"] != tc.code || e["message"] == "" {
					t.Errorf("body %s", pe.Body)
				}
			}
		})
	}
}

func TestBedrockRefusesWhatItCannotTranslate(t *testing.T) {
	t.Parallel()
	b := setupBedrock(t, mock.Config{}, nil)
	_, err := b.ad.Do(t.Context(), Call{Path: "/chat/completions", Body: []byte(`{"model":"m","n":3,"messages":[{"role":"user","content":"x"}]}`)})
	var pe *Error
	if !errors.As(err, &pe) || pe.Status != http.StatusBadRequest || pe.Retryable() {
		t.Fatalf("error %v", err)
	}
	if e := jsonOf(t, pe.Body)["error"].(map[string]any); e["param"] != "n" || e["type"] != "invalid_request_error" {
		t.Errorf("body %s", pe.Body)
	}
	_, err = b.ad.Do(t.Context(), Call{Path: "/embeddings", Body: []byte(`{"model":"m","input":"x"}`)})
	if !errors.As(err, &pe) || pe.Status != http.StatusBadRequest || !strings.Contains(string(pe.Body), "/embeddings") {
		t.Fatalf("embeddings: %v", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.got) != 0 {
		t.Errorf("refused calls reached the upstream: %d", len(b.got))
	}
}

func TestBedrockStreamException(t *testing.T) {
	t.Parallel()
	b := setupBedrock(t, mock.Config{CompletionTokens: 6}, nil)
	b.setHeader("X-Mock-Stream-Exception", "throttlingException")
	resp, err := b.ad.Do(t.Context(), Call{Path: "/chat/completions", Stream: true,
		Body: []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	var pe *Error
	if !errors.As(err, &pe) || pe.Status != http.StatusTooManyRequests || pe.RetryAfter != throttleRetryAfter {
		t.Fatalf("read error %v, want a throttling *Error", err)
	}
	// The role and the first half of the tokens came before it.
	if evs := sse(t, body); len(evs) != 1+3 || strings.Contains(string(body), "[DONE]") {
		t.Errorf("before the exception: %q", evs)
	}
}

func TestBedrockIdleTimeoutAndClose(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Unix(0, 0))
	b := setupBedrock(t, mock.Config{CompletionTokens: 6}, func(c *BedrockConfig) {
		c.Clock, c.IdleTimeout, c.AbortGrace = clk, 10*time.Second, time.Hour
	})
	b.setHeader("X-Mock-Stall", "1h")
	resp, err := b.ad.Do(t.Context(), Call{Path: "/chat/completions", Stream: true,
		Body: []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	err2 := readPastStall(t, clk, resp.Body, "data: ")
	var pe *Error
	if !errors.As(err2, &pe) || !pe.Timeout {
		t.Fatalf("read after the stall: %v; want a timeout *Error", err2)
	}
	if err := resp.Body.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.served:
	case <-time.After(10 * time.Second):
		t.Fatal("the mock never saw the call end")
	}
}

func TestBedrockCloseBeforeTheEnd(t *testing.T) {
	t.Parallel()
	b := setupBedrock(t, mock.Config{CompletionTokens: 6}, func(c *BedrockConfig) { c.AbortGrace = time.Hour })
	b.setHeader("X-Mock-Stall", "1h")
	resp, err := b.ad.Do(t.Context(), Call{Path: "/chat/completions", Stream: true,
		Body: []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resp.Body.Read(make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	// The SDK's goroutine is reading the stalled body: Close aborts it,
	// and returns once the upstream has hung up.
	if err := resp.Body.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.served:
	default:
		t.Fatal("Close returned while the upstream still held the request")
	}
	if st := b.mock.Stats(); st.ByStatus[499] != 1 {
		t.Errorf("the mock counted %v", st.ByStatus)
	}
}

func TestBedrockCredentials(t *testing.T) {
	// Not parallel: it sets the process's environment.
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDFROMCHAIN")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "chainsecret")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_BEARER_TOKEN_BEDROCK", "")
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"x"}]}`)
	auth := func(b *bedrockBundle) string {
		t.Helper()
		resp, err := b.ad.Do(t.Context(), Call{Path: "/chat/completions", Body: body})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return b.last(t).header.Get("Authorization")
	}

	chain := setupBedrock(t, mock.Config{}, func(c *BedrockConfig) { c.AccessKeyID, c.SecretAccessKey = "", "" })
	if a := auth(chain); !strings.HasPrefix(a, "AWS4-HMAC-SHA256 Credential=AKIDFROMCHAIN/") {
		t.Errorf("default chain: Authorization %q", a)
	}
	apiKey := setupBedrockOver(t, httptest.NewTLSServer, mock.Config{}, func(c *BedrockConfig) { c.AccessKeyID, c.APIKey = "", "bedrock-api-key-1" })
	if a := auth(apiKey); a != "Bearer bedrock-api-key-1" {
		t.Errorf("API key: Authorization %q", a)
	}
	// A key pair named wins over an API key in the environment.
	t.Setenv("AWS_BEARER_TOKEN_BEDROCK", "from-the-environment")
	pair := setupBedrock(t, mock.Config{}, nil)
	if a := auth(pair); !strings.HasPrefix(a, "AWS4-HMAC-SHA256 Credential=AKIDBEDROCKTEST/") {
		t.Errorf("key pair beside AWS_BEARER_TOKEN_BEDROCK: Authorization %q", a)
	}
	if _, err := NewBedrock(t.Context(), BedrockConfig{}); err == nil {
		t.Error("no region: no error")
	}
}

func TestBedrockFailure(t *testing.T) {
	t.Parallel()
	withResponse := func(status int, h http.Header, err error) error {
		return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status, Header: h}}, Err: err}}
	}
	cases := []struct {
		name       string
		err        error
		status     int
		retryAfter time.Duration
		credential bool
		body       bool
	}{
		{"throttled with Retry-After", withResponse(429, http.Header{"Retry-After": {"3"}}, &types.ThrottlingException{Message: aws.String("slow")}),
			429, 3 * time.Second, false, false},
		{"throttled in a stream", &types.ThrottlingException{}, 429, throttleRetryAfter, false, false},
		{"quota", withResponse(400, nil, &smithy.GenericAPIError{Code: "ServiceQuotaExceededException"}), 429, 0, false, false},
		{"model not ready", withResponse(429, nil, &types.ModelNotReadyException{}), 503, 0, false, false},
		{"unavailable in a stream", &types.ServiceUnavailableException{}, 503, 0, false, false},
		{"model stream error", &types.ModelStreamErrorException{}, 502, 0, false, false},
		{"model timeout", withResponse(408, nil, &types.ModelTimeoutException{}), 408, 0, false, false},
		{"unrecognized client", withResponse(403, nil, &smithy.GenericAPIError{Code: "UnrecognizedClientException", Message: "The security token included in the request is invalid."}),
			403, 0, true, false},
		{"expired token without a status", &smithy.GenericAPIError{Code: "ExpiredTokenException"}, 403, 0, true, false},
		{"validation in a stream", &types.ValidationException{Message: aws.String("bad")}, 400, 0, false, true},
		{"an unknown 4xx", withResponse(409, nil, &smithy.GenericAPIError{Code: "ConflictException", Message: "x"}), 409, 0, false, true},
		{"an unknown exception in a stream", &smithy.GenericAPIError{Code: "SomethingNewException"}, 500, 0, false, false},
	}
	for _, tc := range cases {
		var pe *Error
		if !errors.As(bedrockFailure(t.Context(), tc.err), &pe) {
			t.Fatalf("%s: not an *Error", tc.name)
		}
		if pe.Status != tc.status || pe.RetryAfter != tc.retryAfter || pe.Credential != tc.credential || (pe.Body != nil) != tc.body {
			t.Errorf("%s: %+v; want status %d, retry after %s, credential %v, body %v", tc.name, pe, tc.status, tc.retryAfter, tc.credential, tc.body)
		}
		if !errors.Is(pe, tc.err) {
			t.Errorf("%s: the SDK's error is not kept", tc.name)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := bedrockFailure(ctx, &types.ThrottlingException{}); !errors.Is(err, context.Canceled) {
		t.Errorf("after the client left: %v", err)
	}
	timeout := &Error{Timeout: true}
	if err := bedrockFailure(t.Context(), fmt.Errorf("decode event: %w", timeout)); err != timeout {
		t.Errorf("a bound passing: %v", err)
	}
}
