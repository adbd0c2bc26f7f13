package tokens_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/tokens"
)

// CountJSON counts the text of a body's string values in the encoding,
// escaped or not, and the rest of it (names among it) at four bytes a
// token.
func TestCountJSON(t *testing.T) {
	t.Parallel()
	const enc = weir.TokenizerO200k
	raw := `{"model":"gpt-4o","messages":[{"role":"user","content":"` + chinese + `"}]}`
	// The structure: every byte but the content's text.
	rest := int64(len(raw)-len(chinese)+3) / 4
	want := tokens.Count(enc, chinese) + rest
	if got := tokens.CountJSON(enc, []byte(raw)); got != want {
		t.Errorf("CountJSON = %d, want %d", got, want)
	}
	// The same prompt \u-escaped, as Python's json.dumps writes it,
	// counts the same text; only the structure's bytes are the same.
	var esc strings.Builder
	for _, r := range chinese {
		esc.WriteString(`\u` + hex4(r))
	}
	escaped := strings.Replace(raw, chinese, esc.String(), 1)
	if got := tokens.CountJSON(enc, []byte(escaped)); got != want {
		t.Errorf("CountJSON of the escaped body = %d, want %d", got, want)
	}
	if got, wantPair := tokens.CountJSON(enc, []byte(`["\ud83d\ude42"]`)), tokens.Count(enc, "🙂")+1; got != wantPair {
		t.Errorf("CountJSON of a surrogate pair = %d, want %d", got, wantPair)
	}
}

func hex4(r rune) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[r>>12&15], digits[r>>8&15], digits[r>>4&15], digits[r&15]})
}

// An inline image's base64 is counted at four bytes a token, not as text
// (and not through the encoding, which would be slow).
func TestCountJSONBlob(t *testing.T) {
	t.Parallel()
	b64 := strings.Repeat("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg", 100)
	for _, body := range []string{
		`{"url":"data:image/png;base64,` + b64 + `"}`,
		`{"data":"` + b64 + `"}`,
	} {
		want := int64(len(body)+3) / 4
		if got := tokens.CountJSON(weir.TokenizerO200k, []byte(body)); got != want {
			t.Errorf("CountJSON of %.30q… = %d, want %d", body, got, want)
		}
	}
}

// Whatever the bytes, CountJSON neither panics nor returns less than
// nothing.
func FuzzCountJSON(f *testing.F) {
	for _, s := range []string{`{"a":"b"}`, `"\u`, `"\ud83d\u`, `"\`, `{"x":"` + chinese, "\"\xff\"", `"\uZZZZ"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, enc := range []weir.Tokenizer{weir.TokenizerEstimate, weir.TokenizerCL100k} {
			if n := tokens.CountJSON(enc, b); n < 0 {
				t.Fatalf("CountJSON(%s, %q) = %d", enc, b, n)
			}
		}
	})
}

// A Prompt counts once an encoding, whoever asks, and at least a token.
func TestPrompt(t *testing.T) {
	t.Parallel()
	body := []byte(`{"input":"` + chinese + `"}`)
	p := tokens.NewPrompt(body)
	var wg sync.WaitGroup
	got := make([]int64, 8)
	for i := range got {
		wg.Go(func() { got[i] = p.Tokens(weir.TokenizerCL100k) })
	}
	wg.Wait()
	want := tokens.CountJSON(weir.TokenizerCL100k, body)
	for _, n := range got {
		if n != want {
			t.Fatalf("Tokens = %v, want %d each", got, want)
		}
	}
	if n := tokens.NewPrompt(nil).Tokens(weir.TokenizerEstimate); n != 1 {
		t.Errorf("an empty prompt counts %d, want 1", n)
	}
}

// A Prompt made by Init counts as NewPrompt's does, in every encoding,
// and Init starts it over on another body: nothing counted before stays.
func TestPromptInit(t *testing.T) {
	t.Parallel()
	first := []byte(`{"input":"` + chinese + `"}`)
	second := []byte(`{"input":"hello there, a much shorter prompt"}`)
	var p tokens.Prompt
	for _, body := range [][]byte{first, second} {
		p.Init(body)
		for _, enc := range []weir.Tokenizer{weir.TokenizerEstimate, weir.TokenizerO200k, weir.TokenizerCL100k} {
			if got, want := p.Tokens(enc), tokens.NewPrompt(body).Tokens(enc); got != want {
				t.Errorf("%s, %s: Init's prompt counts %d, NewPrompt's %d", body[:12], enc, got, want)
			}
		}
	}
}

// Past ExactBytes, a body's text is estimated at the rate the encoding
// counted the text before it: within 2% of the exact count for a long
// prompt in one language, or English then Chinese.
func TestCountJSONPastExactBytes(t *testing.T) {
	t.Parallel()
	english := strings.Repeat("The quick brown fox jumps over the lazy dog, then writes a report on it. ", 2000)
	for _, text := range []string{strings.Repeat(chinese, 1300), english, english[:tokens.ExactBytes/2] + strings.Repeat(chinese, 1000)} {
		if len(text) < 2*tokens.ExactBytes {
			t.Fatalf("a text of %d bytes: under twice ExactBytes", len(text))
		}
		for _, enc := range []weir.Tokenizer{weir.TokenizerO200k, weir.TokenizerCL100k} {
			exact := tokens.Count(enc, text)
			got := tokens.CountJSON(enc, []byte(`"`+text+`"`)) - 1 // less the quotes
			if d := float64(got-exact) / float64(exact); d < -0.02 || d > 0.02 {
				t.Errorf("%s, %.20q…: %d tokens, the exact count %d (%+.1f%%)", enc, text, got, exact, 100*d)
			}
		}
	}
}
