package mock

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

const azureChat = "/openai/deployments/my-gpt4o/chat/completions?api-version=2024-10-21"

var azureKey = map[string]string{"Api-Key": "azure-key"}

func TestAzureDeploymentsAnswerAsOpenAI(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{Models: []string{"my-gpt4o", "my-embed"}, CompletionTokens: 4})
	// The deployment is the model, whatever the body names.
	b := expectStatus(t, f.post(azureChat, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, azureKey), http.StatusOK)
	m := obj(t, b)
	if m["object"] != "chat.completion" || m["model"] != "my-gpt4o" {
		t.Fatalf("answer %s", b)
	}
	b = expectStatus(t, f.post(azureChat, `{"messages":[{"role":"user","content":"hi"}],"stream":true}`, map[string]string{"Authorization": "Bearer entra-token"}), http.StatusOK)
	if ev := sseEvents(t, b); ev[len(ev)-1] != "[DONE]" {
		t.Fatalf("stream %s", b)
	}
	b = expectStatus(t, f.post("/openai/deployments/my-embed/embeddings?api-version=2024-10-21", `{"input":"x"}`, azureKey), http.StatusOK)
	if obj(t, b)["object"] != "list" {
		t.Fatalf("embeddings %s", b)
	}
}

func TestAzureRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{Models: []string{"my-gpt4o"}})
	azureErr := func(resp *http.Response, status int, code string) map[string]any {
		t.Helper()
		b := expectStatus(t, resp, status)
		e, _ := obj(t, b)["error"].(map[string]any)
		if e == nil || e["code"] != code {
			t.Fatalf("error %s; want code %s", b, code)
		}
		return e
	}
	body := `{"messages":[{"role":"user","content":"hi"}]}`
	azureErr(f.post("/openai/deployments/my-gpt4o/chat/completions", body, azureKey), http.StatusNotFound, "404")
	azureErr(f.post("/openai/deployments/my-gpt4o/completions?api-version=1", body, azureKey), http.StatusNotFound, "404")
	azureErr(f.post(azureChat, body, nil), http.StatusUnauthorized, "401")
	azureErr(f.post(strings.Replace(azureChat, "my-gpt4o", "nope", 1), body, azureKey), http.StatusNotFound, "DeploymentNotFound")
	e := azureErr(f.post(azureChat, body, map[string]string{"Api-Key": "k", "X-Mock-Content-Filter": "1"}), http.StatusBadRequest, "content_filter")
	var inner struct {
		Result map[string]struct{ Filtered bool } `json:"content_filter_result"`
	}
	raw, _ := json.Marshal(e["innererror"])
	if json.Unmarshal(raw, &inner) != nil || !inner.Result["violence"].Filtered {
		t.Fatalf("content filter error %v", e)
	}
}
