package tokens_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/tokens"
)

// chatBody is a chat request of about size bytes whose one message is
// text repeated.
func chatBody(text string, size int) []byte {
	const head, tail = `{"model":"gpt-4o","messages":[{"role":"user","content":"`, `"}]}`
	n := max((size-len(head)-len(tail))/len(text), 1)
	return []byte(head + strings.Repeat(text, n) + tail)
}

// BenchmarkEstimate counts a chat body's prompt of 1 KB, 32 KB and
// 512 KB, English and Chinese: "old" is four bytes of body a token,
// "estimate" CountJSON's estimate, the others the encodings (each loaded
// before the timing).
func BenchmarkEstimate(b *testing.B) {
	const english = "The quick brown fox jumps over the lazy dog, then writes a report on it. "
	for _, lang := range []struct{ name, text string }{{"en", english}, {"zh", chinese}} {
		for _, size := range []int{1 << 10, 32 << 10, 512 << 10} {
			body := chatBody(lang.text, size)
			for _, m := range []struct {
				name  string
				count func([]byte) int64
			}{
				{"old", func(body []byte) int64 { return int64(len(body))/4 + 1 }},
				{"estimate", func(body []byte) int64 { return tokens.CountJSON(weir.TokenizerEstimate, body) }},
				{"o200k_base", func(body []byte) int64 { return tokens.CountJSON(weir.TokenizerO200k, body) }},
				{"cl100k_base", func(body []byte) int64 { return tokens.CountJSON(weir.TokenizerCL100k, body) }},
			} {
				b.Run(fmt.Sprintf("%s/%dKB/%s", lang.name, size>>10, m.name), func(b *testing.B) {
					n := m.count(body)
					b.SetBytes(int64(len(body)))
					for b.Loop() {
						m.count(body)
					}
					b.ReportMetric(float64(n), "tokens")
				})
			}
		}
	}
}
