package gateway

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// usageByJSON is what encoding/json decodes the usage object at the
// start of b into, as usageOf's fallback decodes it; ok is false where
// it fails or reads null.
func usageByJSON(b []byte) (usage, bool) {
	var u *usage
	if json.NewDecoder(bytes.NewReader(b)).Decode(&u) != nil || u == nil {
		return usage{}, false
	}
	return *u, true
}

var usageCases = []string{
	`{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}`,
	`{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`,
	` { "prompt_tokens" : 3 , "completion_tokens":4 } ,"x":1}`,
	`{"input_tokens":5,"input_tokens_details":{"cached_tokens":2},"output_tokens":6,"total_tokens":11}`,
	`{"input_tokens":5,"cache_creation_input_tokens":7,"cache_read_input_tokens":11,"output_tokens":6}`,
	`{"prompt_tokens":100,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":64,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"accepted_prediction_tokens":0}}`,
	`{"prompt_tokens":-5,"completion_tokens":null,"prompt_tokens_details":null}`,
	`{"prompt_tokens":9223372036854775807,"completion_tokens":1}`,
	`{"prompt_tokens":9223372036854775808}`,
	`{"prompt_tokens":1.0}`,
	`{"prompt_tokens":1e2}`,
	`{"prompt_tokens":"1"}`,
	`{"prompt_tokens":01}`,
	`{"prompt_tokens":1,"prompt_tokens":2}`,
	`{"Prompt_Tokens":1}`,
	`{"PROMPT_TOKENS":1,"completion_tokens":2}`,
	`{"prompt_tokens_details":{"Cached_Tokens":1},"prompt_tokens":1}`,
	`{"prompt_tokens_details":{"cached_tokens":1,"cached_tokens":2}}`,
	`{"prompt_tokens_details":5}`,
	`{"prompt_tokens_details":[1]}`,
	`{"CachedTokens":5,"Images":3,"counted":true,"prompt_tokens":1}`,
	`{"pr\u006fmpt_tokens":1}`,
	`{"prompt_tokens":1,"other":{"a":[1,2,{"b":"\u00e9\n"}],"c":null,"d":true,"e":-0.5e3}}`,
	`{"ſompt_tokens":1}`,
	`{}`,
	`null`,
	`"usage"`,
	`5`,
	`[]`,
	`{"prompt_tokens":1`,
	`{"prompt_tokens":1,}`,
	`{"prompt_tokens" 1}`,
	`{prompt_tokens:1}`,
	`{"prompt_tokens":1 "completion_tokens":2}`,
	`{"x":"` + "\x01" + `","prompt_tokens":1}`,
	`{"x":"\xff","prompt_tokens":1}`,
	``,
	`   `,
}

// TestDecodeUsageAsJSON: where decodeUsage reads a usage, it reads what
// encoding/json does; where encoding/json fails, so does decodeUsage.
func TestDecodeUsageAsJSON(t *testing.T) {
	t.Parallel()
	fast := 0
	for _, b := range usageCases {
		checkDecodeUsage(t, []byte(b))
		if _, ok := decodeUsage([]byte(b)); ok {
			fast++
		}
	}
	if fast < 8 {
		t.Errorf("decodeUsage read %d of the cases itself; want the ordinary ones", fast)
	}
}

func checkDecodeUsage(t *testing.T, b []byte) {
	t.Helper()
	got, ok := decodeUsage(b)
	want, wantOK := usageByJSON(b)
	if ok && (!wantOK || got != want) {
		t.Errorf("decodeUsage(%q) = %+v, true; encoding/json: %+v, %v", b, got, want, wantOK)
	}
}

// FuzzDecodeUsage: decodeUsage reads nothing differently from
// encoding/json.
func FuzzDecodeUsage(f *testing.F) {
	for _, b := range usageCases {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecodeUsage(t, b) })
}

// TestUsageOfFallsBack: a usage that decodeUsage leaves to encoding/json
// is read as before.
func TestUsageOfFallsBack(t *testing.T) {
	t.Parallel()
	u, ok := usageOf([]byte(`{"id":"x","usage":{"Prompt_Tokens":3,"completion_tokens":4}}`))
	if !ok || u.PromptTokens != 3 || u.total() != 7 {
		t.Errorf("usageOf with a key in other letter case = %+v %v; want 3 prompt tokens, 7 in all", u, ok)
	}
}

// chatAnswer is an answer like the mock's: about 1 KB, usage last.
var chatAnswer = []byte(`{"id":"chatcmpl-mock","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("lorem ipsum ", 70) +
	`"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":80,"total_tokens":92,` +
	`"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`)

func BenchmarkUsageOf(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if u, ok := usageOf(chatAnswer); !ok || u.total() != 92 {
			b.Fatal(u, ok)
		}
	}
}

// TestLastUsageKey: lastUsageKey finds what bytes.LastIndex finds, in
// answers and around the key's own bytes (overlaps, a key at either end,
// runs of its letters), and in random bytes drawn from its letters.
func TestLastUsageKey(t *testing.T) {
	t.Parallel()
	cases := []string{"", `"usage`, `usage"`, `"usage"`, `""usage"`, `"usage""`, `"usage"usage"`, `x"usage":{}`,
		`"usag"usage"e"`, `"u"us"usa"usag"usage"`, `"usage" "usage"`, `sage"usage"usag`, string(chatAnswer),
		`{"usage":null,"x":"\"usage\""}`, strings.Repeat(`"usag`, 9), strings.Repeat("eg", 20) + `"usage"` + strings.Repeat("gasu", 9)}
	rng := uint64(1)
	for n := 0; n < 20000; n++ {
		b := make([]byte, n%40)
		for i := range b {
			rng = rng*6364136223846793005 + 1442695040888963407
			b[i] = `"usagex`[rng>>33%7]
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		if got, want := lastUsageKey([]byte(s)), bytes.LastIndex([]byte(s), []byte(`"usage"`)); got != want {
			t.Fatalf("lastUsageKey(%q) = %d; bytes.LastIndex: %d", s, got, want)
		}
	}
}
