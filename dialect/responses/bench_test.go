package responses

import (
	"io"
	"os"
	"testing"
)

// The benchmarks' bodies: the request weir-bench sends, a conversation
// with a tool, and a ~1 KB Chat Completions answer shaped as OpenAI's.
const (
	benchRequest      = `{"model":"gpt-4o-mini","input":"Write one short paragraph on why a gateway queues a burst of work."}`
	benchConversation = `{"model":"gpt-4o-mini","instructions":"You are terse.","input":[{"role":"user","content":[{"type":"input_text","text":"What is the weather in Paris?"}]},{"type":"function_call","call_id":"call_1","name":"weather","arguments":"{\"city\":\"Paris\"}"},{"type":"function_call_output","call_id":"call_1","output":"18C, clear"},{"role":"user","content":"And tomorrow?"}],"tools":[{"type":"function","name":"weather","description":"The weather in a city.","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],"tool_choice":"auto","temperature":0.2,"max_output_tokens":256,"metadata":{"team":"bench"}}`
	benchAnswer       = `{"id":"chatcmpl-SmAgN5osSbRsRgJaEYGIvB2n6i4Ce","object":"chat.completion","created":1796555342,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"A gateway queues a burst of work because the upstream can only take so many requests at once: rather than refusing what arrives above that, it holds each request in a fair queue, admits it when capacity frees, and answers in order, so that a burst costs a little waiting instead of a storm of errors and retries. The queue also keeps one tenant from starving another, bounds how long anyone waits, and sheds load with a clear answer when the wait would be too long. ","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":23,"completion_tokens":96,"total_tokens":119,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_weirmock"}`
)

// BenchmarkRequest: a Responses request read, checked and translated to
// the Chat Completions body the gateway sends.
func BenchmarkRequest(b *testing.B) {
	for _, bc := range []struct{ name, body string }{{"short", benchRequest}, {"conversation", benchConversation}} {
		b.Run(bc.name, func(b *testing.B) {
			body := []byte(bc.body)
			b.ReportAllocs()
			for b.Loop() {
				r, err := Parse(body)
				if err != nil {
					b.Fatal(err)
				}
				c, err := r.ChatRequest()
				if err != nil {
					b.Fatal(err)
				}
				if _, err := c.Marshal(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFromChat: a ~1 KB Chat Completions answer translated to the
// Response's JSON.
func BenchmarkFromChat(b *testing.B) {
	r, err := Parse([]byte(benchRequest))
	if err != nil {
		b.Fatal(err)
	}
	tr := NewTranslation(r, testNow)
	body := []byte(benchAnswer)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tr.FromChat(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStream: the mock's streamed answer (testdata/stream.txt), chunk by
// chunk, translated to Responses events; the figure is per stream.
func BenchmarkStream(b *testing.B) {
	in, err := os.ReadFile("testdata/stream.txt")
	if err != nil {
		b.Fatal(err)
	}
	r, err := Parse([]byte(`{"model":"gpt-4o-mini","input":"hi","stream":true}`))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		w := &Writer{W: io.Discard, S: NewTranslation(r, testNow).NewStream()}
		if _, err := w.Write(in); err != nil {
			b.Fatal(err)
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
