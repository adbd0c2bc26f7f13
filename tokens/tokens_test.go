package tokens_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/tiktoken-go/tokenizer"
	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/tokens"
)

// Counts match OpenAI's tiktoken for strings whose encodings it
// publishes, and the library's for the rest.
func TestCountMatchesTheLibrary(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		t    weir.Tokenizer
		text string
		want int64
	}{
		{weir.TokenizerCL100k, "tiktoken is great!", 6},
		{weir.TokenizerCL100k, "antidisestablishmentarianism", 6},
		{weir.TokenizerO200k, "hello world", 2},
	} {
		if got := tokens.Count(tc.t, tc.text); got != tc.want {
			t.Errorf("Count(%s, %q) = %d, want %d", tc.t, tc.text, got, tc.want)
		}
	}
	cl, err := tokenizer.Get(tokenizer.Cl100kBase)
	if err != nil {
		t.Fatal(err)
	}
	if ids, _, _ := cl.Encode("tiktoken is great!"); !slices.Equal(ids, []uint{83, 1609, 5963, 374, 2294, 0}) {
		t.Errorf("cl100k_base encodes %v, not tiktoken's ids", ids)
	}
	for _, enc := range []weir.Tokenizer{weir.TokenizerO200k, weir.TokenizerCL100k} {
		c, err := tokenizer.Get(tokenizer.Encoding(enc))
		if err != nil {
			t.Fatal(err)
		}
		for _, text := range []string{chinese, japanese, "The quick brown fox jumps over the lazy dog."} {
			want, _ := c.Count(text)
			if got := tokens.Count(enc, text); got != int64(want) {
				t.Errorf("Count(%s, %.20q…) = %d, the library's %d", enc, text, got, want)
			}
		}
	}
}

const (
	chinese  = "人工智能网关在请求之间排队，而不是失败。每个请求都有价格，并且支出也是一种限制。"
	japanese = "東京の天気は晴れです。明日は雨が降るかもしれません。ゲートウェイは要求を待たせます。"
)

// The estimate counts a token a CJK character, where four bytes a token
// counted one for every 1.33 characters.
func TestEstimate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text string
		want int64
	}{
		{"", 0},
		{"abcd", 1},
		{"abcde", 2},
		{"你好", 2},
		{"héllo", 2}, // six bytes: é is two
		{"🙂 ok", 2},  // the emoji, and three bytes
		{chinese, int64(len([]rune(chinese)))},
		{"\xff\xfe", 2}, // not UTF-8: a token a byte from 0xe0
		{"\xe4", 1},     // a lead byte alone
	} {
		if got := tokens.Estimate(tc.text); got != tc.want {
			t.Errorf("Estimate(%q) = %d, want %d", tc.text, got, tc.want)
		}
	}
	// A Chinese prompt is not under-counted against cl100k_base, which
	// four bytes a token is.
	real := tokens.Count(weir.TokenizerCL100k, strings.Repeat(chinese, 10))
	if est := tokens.Estimate(strings.Repeat(chinese, 10)); est < real {
		t.Errorf("Estimate of Chinese = %d, under cl100k_base's %d", est, real)
	}
}
