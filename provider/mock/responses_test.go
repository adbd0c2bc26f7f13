package mock

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

func responsesWith(extra map[string]any) map[string]any {
	m := map[string]any{"model": "gpt-4o-mini", "input": "Say hello to the mock provider."}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

var weatherFunction = map[string]any{"type": "function", "name": "get_weather", "parameters": map[string]any{
	"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}}

func TestResponse(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{CompletionTokens: 6})
	m := obj(t, expectStatus(t, f.post("/v1/responses", responsesWith(map[string]any{"instructions": "Be brief."}), nil), http.StatusOK))
	hasKeys(t, "response", m, "id", "object", "created_at", "status", "error", "incomplete_details", "instructions", "model", "output", "store", "usage", "metadata")
	if !strings.HasPrefix(m["id"].(string), "resp_") || m["object"] != "response" || m["status"] != "completed" || m["store"] != true {
		t.Errorf("response head %v", m)
	}
	item := m["output"].([]any)[0].(map[string]any)
	part := item["content"].([]any)[0].(map[string]any)
	if item["type"] != "message" || item["role"] != "assistant" || part["type"] != "output_text" || part["text"] != "This is a mock answer. Done." {
		t.Errorf("output %v", item)
	}
	u := m["usage"].(map[string]any)
	// 3 + the input as sent (33 bytes) as 9 + the instructions (9) as 3.
	if u["input_tokens"] != 15.0 || u["output_tokens"] != 6.0 || u["total_tokens"] != 21.0 {
		t.Errorf("usage %v", u)
	}

	// Kept, it can be fetched, continued, listed and deleted.
	id := m["id"].(string)
	got := obj(t, expectStatus(t, f.request(t.Context(), http.MethodGet, "/v1/responses/"+id, nil, nil), http.StatusOK))
	if got["id"] != id || got["status"] != "completed" {
		t.Errorf("GET: %v", got)
	}
	next := obj(t, expectStatus(t, f.post("/v1/responses", responsesWith(map[string]any{"previous_response_id": id}), nil), http.StatusOK))
	if next["previous_response_id"] != id {
		t.Errorf("continued: %v", next)
	}
	items := obj(t, expectStatus(t, f.request(t.Context(), http.MethodGet, "/v1/responses/"+id+"/input_items", nil, nil), http.StatusOK))
	if data := items["data"].([]any); items["object"] != "list" || len(data) != 1 || data[0].(map[string]any)["role"] != "user" {
		t.Errorf("input items: %v", items)
	}
	expectError(t, f.post("/v1/responses/"+id+"/cancel", nil, nil), http.StatusBadRequest, "invalid_request_error")
	del := obj(t, expectStatus(t, f.request(t.Context(), http.MethodDelete, "/v1/responses/"+id, nil, nil), http.StatusOK))
	if del["deleted"] != true {
		t.Errorf("DELETE: %v", del)
	}
	expectError(t, f.request(t.Context(), http.MethodGet, "/v1/responses/"+id, nil, nil), http.StatusNotFound, "invalid_request_error")
	e := expectError(t, f.post("/v1/responses", responsesWith(map[string]any{"previous_response_id": id}), nil), http.StatusNotFound, "invalid_request_error")
	if e["param"] != "previous_response_id" || e["code"] != "previous_response_not_found" {
		t.Errorf("continuing a deleted response: %v", e)
	}

	// store: false keeps nothing.
	m = obj(t, expectStatus(t, f.post("/v1/responses", responsesWith(map[string]any{"store": false}), nil), http.StatusOK))
	if m["store"] != false {
		t.Errorf("store: %v", m["store"])
	}
	expectError(t, f.request(t.Context(), http.MethodGet, "/v1/responses/"+m["id"].(string), nil, nil), http.StatusNotFound, "invalid_request_error")
}

func TestResponseIncompleteAndTools(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{CompletionTokens: 40})
	m := obj(t, expectStatus(t, f.post("/v1/responses", responsesWith(map[string]any{"max_output_tokens": 16}), nil), http.StatusOK))
	if m["status"] != "incomplete" || m["incomplete_details"].(map[string]any)["reason"] != "max_output_tokens" || m["usage"].(map[string]any)["output_tokens"] != 16.0 {
		t.Errorf("cut short: %v", m)
	}
	m = obj(t, expectStatus(t, f.post("/v1/responses", responsesWith(map[string]any{"tools": []any{weatherFunction}, "tool_choice": "required"}), nil), http.StatusOK))
	item := m["output"].([]any)[0].(map[string]any)
	if item["type"] != "function_call" || item["name"] != "get_weather" || !strings.HasPrefix(item["call_id"].(string), "call_") ||
		!strings.HasPrefix(item["id"].(string), "fc_") || !strings.Contains(item["arguments"].(string), `"city"`) {
		t.Errorf("forced call: %v", item)
	}
	// Tools the model may use, not forced: it answers in text.
	m = obj(t, expectStatus(t, f.post("/v1/responses", responsesWith(map[string]any{"tools": []any{weatherFunction, map[string]any{"type": "web_search"}}}), nil), http.StatusOK))
	if m["output"].([]any)[0].(map[string]any)["type"] != "message" {
		t.Errorf("auto: %v", m)
	}
}

func TestResponseStream(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{CompletionTokens: 4})
	resp := f.post("/v1/responses", responsesWith(map[string]any{"stream": true}), nil)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type %q", ct)
	}
	evs := anthropicEvents(t, expectStatus(t, resp, http.StatusOK))
	var names []string
	for i, ev := range evs {
		names = append(names, ev["type"].(string))
		if ev["sequence_number"] != float64(i) {
			t.Errorf("event %d: sequence_number %v", i, ev["sequence_number"])
		}
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}
	if !slices.Equal(names, want) {
		t.Fatalf("events %v\nwant %v", names, want)
	}
	var text string
	for _, ev := range evs[4:8] {
		text += ev["delta"].(string)
	}
	if done := evs[8]["text"]; done != text || text == "" {
		t.Errorf("deltas %q, done %q", text, done)
	}
	if evs[0]["response"].(map[string]any)["usage"] != nil || evs[0]["response"].(map[string]any)["status"] != "in_progress" {
		t.Errorf("created: %v", evs[0])
	}
	last := evs[len(evs)-1]["response"].(map[string]any)
	if last["status"] != "completed" || last["usage"].(map[string]any)["output_tokens"] != 4.0 {
		t.Errorf("completed: %v", last)
	}

	// A forced call streams its arguments.
	resp = f.post("/v1/responses", responsesWith(map[string]any{"stream": true, "tools": []any{weatherFunction},
		"tool_choice": map[string]any{"type": "function", "name": "get_weather"}}), nil)
	evs = anthropicEvents(t, expectStatus(t, resp, http.StatusOK))
	var args string
	for _, ev := range evs {
		if ev["type"] == "response.function_call_arguments.delta" {
			args += ev["delta"].(string)
		}
	}
	if done := evs[len(evs)-3]; done["type"] != "response.function_call_arguments.done" || done["arguments"] != args || !strings.Contains(args, `"city"`) {
		t.Errorf("arguments %q, done %v", args, done)
	}
}

// TestResponseStreamFails: X-Mock-Stream-Error ends a stream after half
// its tokens with response.failed, its error of that code; the response
// kept is the failed one.
func TestResponseStreamFails(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{CompletionTokens: 4})
	resp := f.post("/v1/responses", responsesWith(map[string]any{"stream": true}), map[string]string{"X-Mock-Stream-Error": "rate_limit_exceeded"})
	evs := anthropicEvents(t, expectStatus(t, resp, http.StatusOK))
	var names []string
	for _, ev := range evs {
		names = append(names, ev["type"].(string))
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta", "response.failed"}
	if !slices.Equal(names, want) {
		t.Fatalf("events %v\nwant %v", names, want)
	}
	failed := evs[len(evs)-1]["response"].(map[string]any)
	if e, _ := failed["error"].(map[string]any); failed["status"] != "failed" || e["code"] != "rate_limit_exceeded" {
		t.Fatalf("response.failed %v", failed)
	}
	got := obj(t, expectStatus(t, f.request(t.Context(), http.MethodGet, "/v1/responses/"+failed["id"].(string), nil, nil), http.StatusOK))
	if got["status"] != "failed" {
		t.Errorf("the kept response: %v", got)
	}
}

func TestResponseAzure(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{Models: []string{"gpt-4o-dep"}})
	resp := f.post("/openai/v1/responses", responsesWith(map[string]any{"model": "gpt-4o-dep"}), map[string]string{"api-key": "k"})
	m := obj(t, expectStatus(t, resp, http.StatusOK))
	if m["model"] != "gpt-4o-dep" {
		t.Errorf("model %v", m["model"])
	}
	b := expectStatus(t, f.request(t.Context(), http.MethodGet, "/openai/v1/responses/"+m["id"].(string), nil, map[string]string{"api-key": "k"}), http.StatusOK)
	if obj(t, b)["id"] != m["id"] {
		t.Errorf("GET: %s", b)
	}
	expectStatus(t, f.post("/openai/v1/responses", responsesWith(nil), nil), http.StatusUnauthorized)
}
