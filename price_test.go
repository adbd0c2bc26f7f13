package weir

import (
	"errors"
	"math"
	"testing"
)

func mustMoney(t testing.TB, s string) Money {
	t.Helper()
	m, err := ParseMoney(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// testPrice is a price with every part set: gpt-4o-mini's tokens, a
// request fee, images by size and quality, seconds and characters.
func testPrice(t testing.TB) Price {
	return Price{
		Input: mustMoney(t, "0.15"), CachedInput: mustMoney(t, "0.075"), Output: mustMoney(t, "0.60"),
		Request: mustMoney(t, "0.001"),
		Images: map[string]Money{
			"1024x1024/hd": mustMoney(t, "0.08"), "1024x1024": mustMoney(t, "0.04"), "*": mustMoney(t, "0.12"),
		},
		Second: mustMoney(t, "0.10"), Characters: mustMoney(t, "15"),
	}
}

func TestPriceCost(t *testing.T) {
	t.Parallel()
	p := testPrice(t)
	tokens := Price{Input: p.Input, Output: p.Output}
	for _, tc := range []struct {
		name  string
		price Price
		m     Metered
		want  string
	}{
		{"nothing is free but the request", p, Metered{}, "0.001"},
		{"a million prompt tokens", tokens, Metered{PromptTokens: 1_000_000}, "0.15"},
		{"cached at their price", tokens, Metered{PromptTokens: 1_000_000, CachedTokens: 1_000_000}, "0.15"},
		{"cached at CachedInput", Price{Input: p.Input, CachedInput: p.CachedInput},
			Metered{PromptTokens: 2_000_000, CachedTokens: 1_000_000}, "0.225"},
		{"cached past the prompt count as the prompt", Price{Input: p.Input, CachedInput: p.CachedInput},
			Metered{PromptTokens: 1_000_000, CachedTokens: 5_000_000}, "0.075"},
		{"one token rounds up", tokens, Metered{CompletionTokens: 1}, "0.0000006"},
		{"a third of a billionth rounds up", Price{Input: 1}, Metered{PromptTokens: 3}, "0.000000001"},
		{"chat", tokens, Metered{PromptTokens: 1000, CompletionTokens: 500}, "0.00045"},
		{"image by size and quality", Price{Images: p.Images}, Metered{Images: 2, Size: "1024x1024", Quality: "hd"}, "0.16"},
		{"image by size", Price{Images: p.Images}, Metered{Images: 1, Size: "1024x1024", Quality: "standard"}, "0.04"},
		{"image by star", Price{Images: p.Images}, Metered{Images: 1, Size: "1792x1024"}, "0.12"},
		{"image unpriced", Price{Images: map[string]Money{"1024x1024": 5}}, Metered{Images: 1, Size: "512x512"}, "0.00"},
		{"seconds", Price{Second: p.Second}, Metered{Millis: 4000}, "0.40"},
		{"a millisecond rounds up", Price{Second: p.Second}, Metered{Millis: 1}, "0.0001"},
		{"characters", Price{Characters: p.Characters}, Metered{Characters: 1000}, "0.015"},
		{"negative counts count as none", p, Metered{PromptTokens: -5, CompletionTokens: -1, Images: -1, Millis: -1, Characters: -1}, "0.001"},
		{"saturates", Price{Output: mustMoney(t, "1000")}, Metered{CompletionTokens: math.MaxInt64}, Money(math.MaxInt64).String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.price.Cost(tc.m); got.String() != tc.want {
				t.Errorf("Cost(%+v) = %s, want %s", tc.m, got, tc.want)
			}
		})
	}
}

func TestPriceEstimate(t *testing.T) {
	t.Parallel()
	p := testPrice(t)
	pm := PlatformModel{Price: p, Supports: Capabilities{MaxOutputTokens: 1000}}
	for _, tc := range []struct {
		name string
		got  Money
		want string
	}{
		{"chat with max_tokens", p.Estimate(Wants{PromptTokens: 1_000_000, MaxTokens: 1_000_000}, KindChat), "0.751"},
		{"chat without: the default", p.Estimate(Wants{}, KindChat), "0.0034576"},
		{"chat without: the platform model's", pm.Estimate(Wants{}, KindChat), "0.0016"},
		{"chat with: not the platform model's", pm.Estimate(Wants{MaxTokens: 10}, KindChat), "0.001006"},
		{"embeddings", p.Estimate(Wants{PromptTokens: 1_000_000, MaxTokens: 50}, KindEmbeddings), "0.151"},
		{"images: one by default", p.Estimate(Wants{Size: "1024x1024"}, KindImages), "0.041"},
		{"images: n", p.Estimate(Wants{Size: "1024x1024", Quality: "hd", N: 3}, KindImages), "0.241"},
		{"speech", p.Estimate(Wants{Characters: 2000}, KindSpeech), "0.031"},
		{"video: seconds", p.Estimate(Wants{Seconds: 8}, KindVideo), "0.801"},
		{"video: the default", p.Estimate(Wants{}, KindVideo), "0.401"},
	} {
		if tc.got.String() != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, tc.got, tc.want)
		}
	}
}

// TestEstimateBoundsCost: where the request bounds the answer, what the
// upstream may report within those bounds costs no more than the
// estimate.
func TestEstimateBoundsCost(t *testing.T) {
	t.Parallel()
	p := testPrice(t)
	w := Wants{PromptTokens: 1200, MaxTokens: 300}
	for _, m := range []Metered{
		{PromptTokens: 1200, CompletionTokens: 300},
		{PromptTokens: 1200, CachedTokens: 1000, CompletionTokens: 300},
		{PromptTokens: 900, CompletionTokens: 12},
	} {
		if c, e := p.Cost(m), p.Estimate(w, KindChat); c > e {
			t.Errorf("Cost(%+v) = %s over the estimate %s", m, c, e)
		}
	}
	img := Wants{Size: "1024x1024", Quality: "hd", N: 2}
	if c, e := p.Cost(Metered{Images: 2, Size: "1024x1024", Quality: "hd"}), p.Estimate(img, KindImages); c > e {
		t.Errorf("images: cost %s over the estimate %s", c, e)
	}
}

func TestPriceValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p    Price
		path string
	}{
		{Price{Input: -1}, "input"},
		{Price{CachedInput: -1}, "cached_input"},
		{Price{Output: -1}, "output"},
		{Price{Request: -1}, "request"},
		{Price{Second: -1}, "second"},
		{Price{Characters: -1}, "characters"},
		{Price{Images: map[string]Money{"1024x1024/hd": -1}}, "images.1024x1024/hd"},
		{Price{Images: map[string]Money{"": 1}}, "images"},
		{Price{Images: map[string]Money{"1024x1024/": 1}}, "images"},
		{Price{Images: map[string]Money{"*/hd": 1}}, "images"},
		{Price{Images: map[string]Money{"a/b/c": 1}}, "images"},
	} {
		err := tc.p.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Path != tc.path || !errors.Is(err, ErrInvalid) {
			t.Errorf("Validate(%+v) = %v, want a FieldError on %s", tc.p, err, tc.path)
		}
	}
	if err := testPrice(t).Validate(); err != nil {
		t.Errorf("a valid price: %v", err)
	}
}

// FuzzPriceCost: a cost never panics, is never negative, and never
// decreases as one of the counts it is priced by grows.
func FuzzPriceCost(f *testing.F) {
	f.Add(int64(1000), int64(100), int64(500), int64(1), int64(4000), int64(100), int64(7), int64(150_000_000))
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64),
		int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64))
	f.Add(int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), int64(1), int64(-1))
	f.Fuzz(func(t *testing.T, prompt, cached, completion, images, millis, chars, grow, unit int64) {
		u := Money(max(unit, 0))
		p := Price{Input: u, CachedInput: u / 2, Output: u / 5 * 4, Request: u / 3,
			Images: map[string]Money{"*": u}, Second: u / 7, Characters: u / 9}
		m := Metered{PromptTokens: prompt, CachedTokens: cached, CompletionTokens: completion,
			Images: images, Millis: millis, Characters: chars}
		c := p.Cost(m)
		if c < 0 {
			t.Fatalf("Cost(%+v) = %d at %+v", m, c, p)
		}
		g := max(grow, 0)
		for _, more := range []func(*Metered){
			func(m *Metered) { m.PromptTokens = addTo(m.PromptTokens, g) },
			func(m *Metered) { m.CompletionTokens = addTo(m.CompletionTokens, g) },
			func(m *Metered) { m.Images = addTo(m.Images, g) },
			func(m *Metered) { m.Millis = addTo(m.Millis, g) },
			func(m *Metered) { m.Characters = addTo(m.Characters, g) },
		} {
			m2 := m
			more(&m2)
			if c2 := p.Cost(m2); c2 < c {
				t.Fatalf("Cost(%+v) = %d < Cost(%+v) = %d", m2, c2, m, c)
			}
		}
		// More of the prompt read from the cache, at a lower price, costs
		// no more, but for the billionth that pricing the prompt in two
		// parts may round up.
		m2 := m
		m2.CachedTokens = addTo(max(m.CachedTokens, 0), g)
		if c2 := p.Cost(m2); c2 > c.Add(1) {
			t.Fatalf("Cost(%+v) = %d > Cost(%+v) = %d", m2, c2, m, c)
		}
	})
}

// addTo is a+b for b >= 0, saturating.
func addTo(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
