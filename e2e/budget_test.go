package e2e

// Budgets end to end: what a client of a spent budget sees (the official
// SDK's error, the Messages API's), and that a hard budget holds its
// bound (docs/budgets.md) through concurrent requests whose real costs
// differ from their estimates, on two replicas and across a kill -9.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider/mock"
	"github.com/weir-gateway/weir/tokens"
)

// pricedCatalog serves model "chat" from up through platform model
// "up/chat", of concurrency 200, at perMillion for input and output
// tokens alike.
func pricedCatalog(upURL, perMillion string) string {
	return fmt.Sprintf(`platforms:
  - name: up
    base_url: %s
platform_models:
  - name: up/chat
    platform: up
    upstream: gpt-4o-mini
    concurrency: 200
    price: {input: %s, output: %s}
models:
  - name: chat
    kind: chat
    candidates:
      - platform_model: up/chat
`, upURL, perMillion, perMillion)
}

// budgetMaxTokens is the max_tokens of every budgetBody.
const budgetMaxTokens = 1000

// budgetBody is a chat request for "chat" whose answer reports the usage
// given (the mock's metadata.mock_usage, "prompt=N,completion=M"). Usages
// written with the same number of digits make bodies of one length, and
// so of one estimate.
func budgetBody(usage string) string {
	return fmt.Sprintf(`{"model":"chat","max_tokens":%d,"metadata":{"mock_usage":%q},"messages":[{"role":"user","content":"Say hello"}]}`,
		budgetMaxTokens, usage)
}

// estimateOf is what the gateway reserves for body at perToken for input
// and output tokens alike (docs/spend.md): its prompt by the estimate
// (the catalog names no encoding: docs/api.md, "Tokens") and its
// max_tokens.
func estimateOf(body string, maxTokens int64, perToken weir.Money) weir.Money {
	return perToken * weir.Money(tokens.CountJSON(weir.TokenizerEstimate, []byte(body))+maxTokens)
}

// costOf is what usage "prompt=N,completion=M" costs at perToken.
func costOf(t *testing.T, usage string, perToken weir.Money) weir.Money {
	t.Helper()
	var prompt, completion int64
	if _, err := fmt.Sscanf(usage, "prompt=%d,completion=%d", &prompt, &completion); err != nil {
		t.Fatalf("usage %q: %v", usage, err)
	}
	return perToken * weir.Money(prompt+completion)
}

// money parses a decimal amount.
func money(t *testing.T, s string) weir.Money {
	t.Helper()
	m, err := weir.ParseMoney(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// keySpend is one key's row of /admin/spend.
type keySpend struct {
	Requests  int64      `json:"requests"`
	Cost      weir.Money `json:"cost"`
	Estimated int64      `json:"estimated"`
}

// spendOfKey reads what key (by id) spent in the last day, as
// /admin/spend reports it.
func (g *gateway) spendOfKey(t *testing.T, keyID string) keySpend {
	t.Helper()
	q := url.Values{"by": {"key"}, "from": {time.Now().Add(-24 * time.Hour).UTC().Format(time.RFC3339)}}
	rep := g.do(t, request{Method: http.MethodGet, Path: "/admin/spend?" + q.Encode()})
	if rep.Status != http.StatusOK {
		t.Fatalf("GET /admin/spend: %d %s", rep.Status, rep.Body)
	}
	var v struct {
		Rows []struct {
			Subject string `json:"subject"`
			keySpend
		} `json:"rows"`
	}
	if err := json.Unmarshal(rep.Body, &v); err != nil {
		t.Fatalf("GET /admin/spend: %v: %s", err, rep.Body)
	}
	for _, r := range v.Rows {
		if r.Subject == keyID {
			return r.keySpend
		}
	}
	return keySpend{}
}

// waitSpend waits until /admin/spend says key spent want (the usage
// records are flushed in batches), and fails saying what it says if it
// does not within 10s.
func (g *gateway) waitSpend(t *testing.T, keyID string, want weir.Money) keySpend {
	t.Helper()
	var got keySpend
	deadline := time.Now().Add(10 * time.Second)
	for {
		if got = g.spendOfKey(t, keyID); got.Cost == want {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("/admin/spend says key %s spent %s over %d requests (%d estimated); want %s", keyID, got.Cost, got.Requests, got.Estimated, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// budgetGauges reads, from the gateway's /metrics, what the admission
// engine says the budget of key (by id) has spent and holds reserved in
// its window (weir_budget_spent, weir_budget_reserved: the gateway needs
// server.metrics_spend_by_key). ok is false while it shows neither.
func (g *gateway) budgetGauges(t *testing.T, keyID string) (spent, reserved float64, ok bool) {
	t.Helper()
	rep := g.do(t, request{Method: http.MethodGet, Path: "/metrics"})
	if rep.Status != http.StatusOK {
		t.Fatalf("GET /metrics: %d", rep.Status)
	}
	subject := `subject="` + keyID + `"`
	spent, ok1 := metric(string(rep.Body), "weir_budget_spent", subject)
	reserved, ok2 := metric(string(rep.Body), "weir_budget_reserved", subject)
	return spent, reserved, ok1 && ok2
}

// sameMoney reports whether a gauge's float says m, to the billionth.
func sameMoney(f float64, m weir.Money) bool {
	return math.Abs(f-float64(m)/1e9) < 0.5e-9
}

// hup makes the gateway read its catalog again, and with it the store's
// budgets, and waits until it has.
func (g *gateway) hup(t *testing.T) {
	t.Helper()
	before := g.logCount("catalog reloaded")
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the gateway to log the reload", func() bool { return g.logCount("catalog reloaded") > before })
}

// errorCode is the code of an answer in OpenAI's error shape, or "".
func errorCode(body []byte) string {
	var v struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &v)
	return v.Error.Code
}

// checkBudgetRefusal checks rep is a refusal by a hard budget: 429
// budget_exceeded, a Retry-After of at least a second and
// x-should-retry: false.
func checkBudgetRefusal(rep *reply) error {
	if rep.Status != http.StatusTooManyRequests || errorCode(rep.Body) != "budget_exceeded" {
		return fmt.Errorf("%d %s; want 429 budget_exceeded", rep.Status, rep.Body)
	}
	if s, err := strconv.Atoi(rep.Header.Get("Retry-After")); err != nil || s < 1 {
		return fmt.Errorf("Retry-After %q; want whole seconds, at least 1", rep.Header.Get("Retry-After"))
	}
	if v := rep.Header.Get("X-Should-Retry"); v != "false" {
		return fmt.Errorf("x-should-retry %q; want false", v)
	}
	return nil
}

// TestBudgetOfficialSDK: a key's hard budget that two requests spend.
// The third request, through the official OpenAI SDK, fails with the
// SDK's *openai.Error: 429, code budget_exceeded, a message naming the
// budget and when it resets, Retry-After the seconds until then, and
// x-should-retry: false. The Messages API refuses the same key with
// Anthropic's rate_limit_error.
func TestBudgetOfficialSDK(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{CompletionTokens: 8})
	catalog := pricedCatalog(up.URL, "1000") // 0.001 a token
	g := startGateway(t, "", catalog)
	keyID, secret := g.createKey(t, "--name", "sdk", "--budget", "0.30/month")
	g.hup(t)
	client := openai.NewClient(
		option.WithBaseURL(g.URL+"/v1/"),
		option.WithAPIKey(secret),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(20*time.Second),
	)
	// Each call reserves its prompt (about 40 tokens) and 100 tokens of
	// output, about 0.14, and costs 0.12: the second fits beside the
	// first's 0.12, the third not beside both's 0.24.
	params := openai.ChatCompletionNewParams{
		Model:     "chat",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")},
		MaxTokens: openai.Int(100),
		Metadata:  shared.Metadata{"mock_usage": "prompt=20,completion=100"},
	}
	ctx := context.Background()
	for i := range 2 {
		if _, err := client.Chat.Completions.New(ctx, params); err != nil {
			t.Fatalf("call %d, within the budget: %v", i+1, err)
		}
	}
	_, err := client.Chat.Completions.New(ctx, params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("the call past the budget: %v; want an *openai.Error", err)
	}
	if apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Code != "budget_exceeded" {
		t.Fatalf("the call past the budget: %d %q: %v; want 429 budget_exceeded", apiErr.StatusCode, apiErr.Code, err)
	}
	now := time.Now().UTC()
	reset := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	for _, want := range []string{"key:" + keyID, "0.30", "month", reset.Format(time.RFC3339)} {
		if !strings.Contains(apiErr.Message, want) {
			t.Errorf("message %q does not say %q", apiErr.Message, want)
		}
	}
	resp := apiErr.Response
	secs, err := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64)
	if want := reset.Sub(now); err != nil || (time.Duration(secs)*time.Second-want).Abs() > 5*time.Second {
		t.Errorf("Retry-After %q; want the %d seconds until the month's end", resp.Header.Get("Retry-After"), int64(want.Seconds()))
	}
	if v := resp.Header.Get("X-Should-Retry"); v != "false" {
		t.Errorf("x-should-retry %q; want false", v)
	}

	rep := g.do(t, request{Path: "/v1/messages", Key: secret, Header: map[string]string{"anthropic-version": "2023-06-01"},
		Body: `{"model":"chat","max_tokens":100,"messages":[{"role":"user","content":"Say hello"}]}`})
	var ae struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rep.Body, &ae); err != nil || rep.Status != http.StatusTooManyRequests || ae.Type != "error" || ae.Error.Type != "rate_limit_error" {
		t.Fatalf("POST /v1/messages past the budget: %d %s; want 429 rate_limit_error", rep.Status, rep.Body)
	}
	if !strings.Contains(ae.Error.Message, "key:"+keyID) || rep.Header.Get("Retry-After") == "" || rep.Header.Get("X-Should-Retry") != "false" {
		t.Errorf("POST /v1/messages past the budget: message %q, Retry-After %q, x-should-retry %q; want the budget named, a Retry-After and false",
			ae.Error.Message, rep.Header.Get("Retry-After"), rep.Header.Get("X-Should-Retry"))
	}
	if n := len(up.Arrivals()); n != 2 {
		t.Errorf("%d calls reached the upstream; want the 2 within the budget", n)
	}
	g.waitSpend(t, keyID, money(t, "0.24"))
}
