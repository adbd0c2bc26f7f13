package openaiwire

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzUnmarshalChatCompletion: UnmarshalChatCompletion decodes what
// json.Unmarshal decodes, to the same value, and refuses what it refuses.
func FuzzUnmarshalChatCompletion(f *testing.F) {
	for _, s := range []string{
		`{"id":"chatcmpl-SmAgN5osSbRsRgJaEYGIvB2n6i4Ce","object":"chat.completion","created":1796555342,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"A gateway queues a burst of work because the upstream can only take so many requests at once: rather than refusing what arrives above that, it holds each request in a fair queue, admits it when capacity frees, and answers in order, so that a burst costs a little waiting instead of a storm of errors and retries. The queue also keeps one tenant from starving another, bounds how long anyone waits, and sheds load with a clear answer when the wait would be too long. ","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":23,"completion_tokens":96,"total_tokens":119,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_weirmock"}`,
		`{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"no","tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1}"},"extra_content":{"g":1}}],"reasoning_content":"hm"},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3,"prompt_tokens_details":{"cached_tokens":1},"completion_tokens_details":{"reasoning_tokens":2}}}`,
		`{"Model":"m"}`, `{"model":"a","model":"b"}`, `null`, `{"choices":[null,{"message":null}],"usage":null}`,
		`{"created":1.5}`, `{"created":"1"}`, `{"choices":[{"message":{"content":[{"type":"text","text":"a"}]}}]}`,
		`{"model":"\u00e9\u00e9"}`, `{"id":"x"`, `{"mod\u0065l":"m"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var want, got ChatCompletion
		werr := json.Unmarshal(body, &want)
		gerr := UnmarshalChatCompletion(body, &got)
		if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
			t.Fatalf("%q: error %v, json.Unmarshal's %v", body, gerr, werr)
		}
		if werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: %+v, json.Unmarshal's %+v", body, got, want)
		}
	})
}

// FuzzUnmarshalChatChunk: UnmarshalChatChunk decodes what json.Unmarshal
// decodes, to the same value, and refuses what it refuses.
func FuzzUnmarshalChatChunk(f *testing.F) {
	for _, s := range []string{
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","service_tier":"default","system_fingerprint":"fp","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"c","function":{"name":"f","arguments":"{"}}],"reasoning_content":"r"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1}}`,
		`{"error":{"message":"m","code":5}}`, `{"error":null,"choices":[]}`, `{"Choices":[]}`, `{"choices":[{"Delta":{}}]}`, `{"choices":[{"delta":{"content":1}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var want, got ChatChunk
		werr := json.Unmarshal(body, &want)
		gerr := UnmarshalChatChunk(body, &got)
		if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
			t.Fatalf("%q: error %v, json.Unmarshal's %v", body, gerr, werr)
		}
		if werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: %+v, json.Unmarshal's %+v", body, got, want)
		}
	})
}

func BenchmarkUnmarshalChatCompletion(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-SmAgN5osSbRsRgJaEYGIvB2n6i4Ce","object":"chat.completion","created":1796555342,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"A gateway queues a burst of work because the upstream can only take so many requests at once: rather than refusing what arrives above that, it holds each request in a fair queue, admits it when capacity frees, and answers in order, so that a burst costs a little waiting instead of a storm of errors and retries. The queue also keeps one tenant from starving another, bounds how long anyone waits, and sheds load with a clear answer when the wait would be too long. ","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":23,"completion_tokens":96,"total_tokens":119,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_weirmock"}`)
	b.ReportAllocs()
	for b.Loop() {
		var cc ChatCompletion
		if err := UnmarshalChatCompletion(body, &cc); err != nil {
			b.Fatal(err)
		}
	}
}

// A chunk read without json.Unmarshal costs only the values that are its
// own (its choices, the delta's content and its pointer), not the
// ChatChunk, which stays where its caller has it. Not parallel:
// AllocsPerRun counts the process's allocations.
func TestUnmarshalChatChunkAllocations(t *testing.T) {
	data := []byte(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}`)
	var content string
	var err error
	read := func() {
		var c ChatChunk
		err = UnmarshalChatChunk(data, &c)
		content = *c.Choices[0].Delta.Content
	}
	if n := testing.AllocsPerRun(100, read); n != 3 || err != nil || content != "Hello" {
		t.Errorf("UnmarshalChatChunk: %v allocations, %v; want 3", n, err)
	}
}
