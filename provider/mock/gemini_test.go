package mock

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

var geminiKey = map[string]string{"X-Goog-Api-Key": "AIza-test"}

const geminiBody = `{"contents":[{"role":"user","parts":[{"text":"Say hello to the mock provider."}]}]}`

// geminiErr checks Google's error JSON and returns its object.
func geminiErr(t *testing.T, resp *http.Response, status int, name string) map[string]any {
	t.Helper()
	b := expectStatus(t, resp, status)
	e, ok := obj(t, b)["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error object: %s", b)
	}
	if e["code"] != float64(status) || e["status"] != name {
		t.Fatalf("error %v; want code %d, status %s", e, status, name)
	}
	if msg, _ := e["message"].(string); msg == "" {
		t.Errorf("empty message: %s", b)
	}
	return e
}

func TestGeminiGenerateContent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{CompletionTokens: 6})
	b := expectStatus(t, f.post("/v1beta/models/gemini-2.5-flash:generateContent", geminiBody, geminiKey), http.StatusOK)
	var got struct {
		Candidates []struct {
			Content struct {
				Role  string `json:"role"`
				Parts []struct {
					Text string `json:"text"`
				} `json:"parts"`
			} `json:"content"`
			FinishReason  string           `json:"finishReason"`
			SafetyRatings []map[string]any `json:"safetyRatings"`
		} `json:"candidates"`
		UsageMetadata struct {
			PromptTokenCount, CandidatesTokenCount, TotalTokenCount int
		} `json:"usageMetadata"`
		ModelVersion, ResponseID string
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	c := got.Candidates[0]
	if c.Content.Role != "model" || c.Content.Parts[0].Text != "This is a mock answer. Done." || c.FinishReason != "STOP" || len(c.SafetyRatings) == 0 {
		t.Fatalf("candidate %+v", c)
	}
	u := got.UsageMetadata
	if u.CandidatesTokenCount != 6 || u.PromptTokenCount != 3+3+8 || u.TotalTokenCount != u.PromptTokenCount+6 {
		t.Fatalf("usage %+v", u)
	}
	if got.ModelVersion != "gemini-2.5-flash" || got.ResponseID == "" {
		t.Fatalf("model %q, id %q", got.ModelVersion, got.ResponseID)
	}
}

func TestGeminiMaxOutputTokensAndJSON(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{CompletionTokens: 6})
	b := expectStatus(t, f.post("/v1beta/models/m:generateContent",
		`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":2}}`, geminiKey), http.StatusOK)
	if !strings.Contains(string(b), `"text":"This is"`) || !strings.Contains(string(b), `"finishReason":"MAX_TOKENS"`) {
		t.Fatalf("cut answer: %s", b)
	}
	b = expectStatus(t, f.post("/v1beta/models/m:generateContent",
		`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"responseMimeType":"application/json",
		  "responseJsonSchema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}}}`, geminiKey), http.StatusOK)
	var got struct {
		Candidates []struct {
			Content struct {
				Parts []struct{ Text string } `json:"parts"`
			} `json:"content"`
		} `json:"candidates"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(got.Candidates[0].Content.Parts[0].Text), &v); err != nil || v["n"] == nil {
		t.Fatalf("JSON answer %s: %v", b, err)
	}
}

func TestGeminiFunctionCallAndItsSignature(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	body := `{"contents":[{"role":"user","parts":[{"text":"weather?"}]}],
		"tools":[{"functionDeclarations":[{"name":"other"},{"name":"weather","parametersJsonSchema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]}],
		"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["weather"]}}}`
	b := expectStatus(t, f.post("/v1beta/models/m:generateContent", body, geminiKey), http.StatusOK)
	var got struct {
		Candidates []struct {
			Content struct {
				Parts []struct {
					FunctionCall *struct {
						Name string         `json:"name"`
						Args map[string]any `json:"args"`
					} `json:"functionCall"`
					ThoughtSignature string `json:"thoughtSignature"`
				} `json:"parts"`
			} `json:"content"`
			FinishReason string `json:"finishReason"`
		} `json:"candidates"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	p := got.Candidates[0].Content.Parts[0]
	if p.FunctionCall == nil || p.FunctionCall.Name != "weather" || p.FunctionCall.Args["city"] == nil || p.ThoughtSignature == "" {
		t.Fatalf("function call: %s", b)
	}

	// Sent back without its signature, the call is refused, as Gemini 3
	// refuses it; with it, it is taken.
	hist := `{"contents":[{"role":"user","parts":[{"text":"weather?"}]},
		{"role":"model","parts":[{"functionCall":{"name":"weather","args":{"city":"Oslo"}}%s}]},
		{"role":"user","parts":[{"functionResponse":{"name":"weather","response":{"content":"rain"}}}]}]}`
	geminiErr(t, f.post("/v1beta/models/m:generateContent", strings.Replace(hist, "%s", "", 1), geminiKey), http.StatusBadRequest, "INVALID_ARGUMENT")
	expectStatus(t, f.post("/v1beta/models/m:generateContent", strings.Replace(hist, "%s", `,"thoughtSignature":"x"`, 1), geminiKey), http.StatusOK)
}

func TestGeminiStream(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{CompletionTokens: 3})
	resp := f.post("/v1beta/models/m:streamGenerateContent?alt=sse", geminiBody, geminiKey)
	b := expectStatus(t, resp, http.StatusOK)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type %q", ct)
	}
	events := strings.Split(strings.TrimSuffix(string(b), "\r\n\r\n"), "\r\n\r\n")
	if len(events) != 3 {
		t.Fatalf("%d events; want one a token: %q", len(events), b)
	}
	var text strings.Builder
	for i, ev := range events {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok {
			t.Fatalf("event %q", ev)
		}
		var r struct {
			Candidates []struct {
				Content struct {
					Parts []struct{ Text string } `json:"parts"`
				} `json:"content"`
				FinishReason string `json:"finishReason"`
			} `json:"candidates"`
			UsageMetadata struct{ PromptTokenCount, CandidatesTokenCount, TotalTokenCount int } `json:"usageMetadata"`
		}
		if err := json.Unmarshal([]byte(data), &r); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		text.WriteString(r.Candidates[0].Content.Parts[0].Text)
		last := i == len(events)-1
		if (r.Candidates[0].FinishReason == "STOP") != last {
			t.Fatalf("event %d: finish %q", i, r.Candidates[0].FinishReason)
		}
		if last && r.UsageMetadata.CandidatesTokenCount != 3 {
			t.Fatalf("last usage %+v", r.UsageMetadata)
		}
	}
	if text.String() != "That is all." {
		t.Fatalf("text %q", text.String())
	}
	geminiErr(t, f.post("/v1beta/models/m:streamGenerateContent", geminiBody, geminiKey), http.StatusBadRequest, "INVALID_ARGUMENT")
}

func TestGeminiErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{Models: []string{"gemini-2.5-flash"}, RetryAfter: 1500 * time.Millisecond})
	geminiErr(t, f.post("/v1beta/models/gemini-2.5-flash:generateContent", geminiBody, nil), http.StatusForbidden, "PERMISSION_DENIED")
	e := geminiErr(t, f.post("/v1beta/models/gemini-2.5-flash:generateContent", geminiBody, map[string]string{"X-Goog-Api-Key": InvalidGeminiKey}),
		http.StatusBadRequest, "INVALID_ARGUMENT")
	if d, _ := e["details"].([]any); len(d) == 0 || d[0].(map[string]any)["reason"] != "API_KEY_INVALID" {
		t.Fatalf("invalid key details: %v", e)
	}
	expectStatus(t, f.post("/v1beta/models/gemini-2.5-flash:generateContent", geminiBody, map[string]string{}), http.StatusForbidden)
	expectStatus(t, f.post("/v1beta/models/gemini-2.5-flash:generateContent?key=AIza", geminiBody, nil), http.StatusOK)
	geminiErr(t, f.post("/v1beta/models/nope:generateContent", geminiBody, geminiKey), http.StatusNotFound, "NOT_FOUND")
	geminiErr(t, f.post("/v1beta/models/gemini-2.5-flash:embedContent", geminiBody, geminiKey), http.StatusNotFound, "NOT_FOUND")
	geminiErr(t, f.post("/v1beta/models/gemini-2.5-flash:generateContent", `{"contents":[]}`, geminiKey), http.StatusBadRequest, "INVALID_ARGUMENT")
	geminiErr(t, f.post("/v1beta/models/gemini-2.5-flash:generateContent", geminiBody,
		map[string]string{"X-Goog-Api-Key": "k", "X-Mock-Status": "503"}), http.StatusServiceUnavailable, "UNAVAILABLE")
	resp := f.post("/v1beta/models/gemini-2.5-flash:generateContent", geminiBody, map[string]string{"X-Goog-Api-Key": "k", "X-Mock-Status": "429"})
	e = geminiErr(t, resp, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED")
	d, _ := e["details"].([]any)
	if len(d) != 1 || d[0].(map[string]any)["@type"] != "type.googleapis.com/google.rpc.RetryInfo" || d[0].(map[string]any)["retryDelay"] != "1.5s" {
		t.Fatalf("429 details: %v", e)
	}
}

func TestGeminiCapAnswersInGooglesShape(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{MaxConcurrent: 1})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.ts.URL+"/v1beta/models/m:generateContent", strings.NewReader(geminiBody))
		req.Header.Set("X-Goog-Api-Key", "k")
		req.Header.Set("X-Mock-Latency", "1h")
		if resp, err := f.ts.Client().Do(req); err == nil {
			resp.Body.Close()
			t.Errorf("held request answered %d", resp.StatusCode)
		}
	})
	f.await(f.waiting, "held request")
	geminiErr(t, f.post("/v1beta/models/m:generateContent", geminiBody, geminiKey), http.StatusTooManyRequests, "RESOURCE_EXHAUSTED")
	cancel()
	wg.Wait()
}
