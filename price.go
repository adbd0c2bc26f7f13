package weir

import (
	"maps"
	"slices"
	"strings"
)

// Price is what calls to a platform model (or a node provider) cost,
// priced from the usage its upstream reports. Every field defaults to 0:
// free. docs/spend.md lists what each kind of model is priced by.
type Price struct {
	// Input, CachedInput and Output are per million tokens: the prompt's
	// tokens not read from the provider's prompt cache, those read from
	// it, and the answer's. CachedInput 0 prices cached tokens as Input.
	Input       Money `yaml:"input" json:"input"`
	CachedInput Money `yaml:"cached_input" json:"cached_input"`
	Output      Money `yaml:"output" json:"output"`
	// Request is per call, whatever it used.
	Request Money `yaml:"request" json:"request"`
	// Images are per image made, by size and quality: "1024x1024/hd"
	// (size and quality), "1024x1024" (any quality), "*" (any other).
	Images map[string]Money `yaml:"images" json:"images,omitempty"`
	// Second is per second of audio or video made.
	Second Money `yaml:"second" json:"second"`
	// Characters is per million characters of input to speech.
	Characters Money `yaml:"characters" json:"characters"`
}

// Metered is what one call used, as a Price prices it.
type Metered struct {
	// PromptTokens counts every prompt token, CachedTokens those of them
	// read from the provider's prompt cache.
	PromptTokens, CachedTokens, CompletionTokens int64
	// Images made, of Size and Quality.
	Images        int64
	Size, Quality string
	// Millis of audio or video made.
	Millis int64
	// Characters of input to speech.
	Characters int64
}

// tokensPerPrice is how many tokens (or characters) a per-million price
// is for.
const tokensPerPrice = 1_000_000

// DefaultMaxOutputTokens is the output Estimate reserves for a chat
// request that sets no max_tokens on a platform model that states no
// max_output_tokens.
const DefaultMaxOutputTokens = 4096

// DefaultVideoSeconds is the length Estimate reserves for a video
// request that states none: OpenAI's default.
const DefaultVideoSeconds = 4

// Cost is what m costs at p: the prompt's tokens not read from the cache
// at Input and those read from it at CachedInput (Input when 0), the
// completion at Output, Request once, each image at its size and
// quality's price (ImagePrice), Second per second of Millis and
// Characters per million characters. Each part is rounded up to the
// billionth, negative counts count as none, cached tokens as at most the
// prompt, and the sum saturates at the largest Money: it never panics and
// never decreases as a count grows.
func (p Price) Cost(m Metered) Money {
	prompt := max(m.PromptTokens, 0)
	cached := min(max(m.CachedTokens, 0), prompt)
	cachedPrice := p.CachedInput
	if cachedPrice == 0 {
		cachedPrice = p.Input
	}
	c := p.Input.MulDiv(prompt-cached, tokensPerPrice)
	c = c.Add(cachedPrice.MulDiv(cached, tokensPerPrice))
	c = c.Add(p.Output.MulDiv(m.CompletionTokens, tokensPerPrice))
	c = c.Add(max(p.Request, 0))
	c = c.Add(p.ImagePrice(m.Size, m.Quality).MulDiv(m.Images, 1))
	c = c.Add(p.Second.MulDiv(m.Millis, 1000))
	return c.Add(p.Characters.MulDiv(m.Characters, tokensPerPrice))
}

// ImagePrice is the price of one image of size and quality: Images'
// "size/quality", else its "size", else its "*", else 0.
func (p Price) ImagePrice(size, quality string) Money {
	if size != "" && quality != "" {
		if v, ok := p.Images[size+"/"+quality]; ok {
			return v
		}
	}
	if size != "" {
		if v, ok := p.Images[size]; ok {
			return v
		}
	}
	return p.Images["*"]
}

// Estimate is what a request that wants w of a model of kind may cost at
// p, reserved before the call: Request, and
//
//   - chat: the prompt's estimate at the dearer of Input and CachedInput,
//     and max_tokens (w.MaxTokens; else DefaultMaxOutputTokens, which
//     PlatformModel.Estimate replaces by its max_output_tokens) at Output;
//   - embeddings: the prompt's estimate at Input;
//   - images: w.N images (1 if not said) at ImagePrice of its size and
//     quality;
//   - speech: w.Characters at Characters;
//   - video: w.Seconds (DefaultVideoSeconds if not said) at Second.
//
// Where the request bounds what is made — max_tokens, n, the input to
// speak, a video's seconds — the estimate is an upper bound of the cost
// of what the upstream may report, given that the prompt's estimate (four
// bytes of JSON a token) is not below its real count. Where it does not
// (a chat without max_tokens on a platform model that states no
// max_output_tokens), it is DefaultMaxOutputTokens' worth, and the real
// cost may pass it.
func (p Price) Estimate(w Wants, kind ModelKind) Money {
	c := max(p.Request, 0)
	switch kind {
	case KindChat:
		out := w.MaxTokens
		if out <= 0 {
			out = DefaultMaxOutputTokens
		}
		c = c.Add(max(p.Input, p.CachedInput).MulDiv(w.PromptTokens, tokensPerPrice))
		c = c.Add(p.Output.MulDiv(out, tokensPerPrice))
	case KindEmbeddings:
		c = c.Add(p.Input.MulDiv(w.PromptTokens, tokensPerPrice))
	case KindImages:
		c = c.Add(p.ImagePrice(w.Size, w.Quality).MulDiv(max(w.N, 1), 1))
	case KindSpeech:
		c = c.Add(p.Characters.MulDiv(w.Characters, tokensPerPrice))
	case KindVideo:
		secs := int64(w.Seconds)
		if secs <= 0 {
			secs = DefaultVideoSeconds
		}
		c = c.Add(p.Second.MulDiv(secs, 1))
	}
	return c
}

// Estimate is Price.Estimate at pm's price, with pm's max_output_tokens
// (when it states one) as the output of a chat request that sets no
// max_tokens.
func (pm PlatformModel) Estimate(w Wants, kind ModelKind) Money {
	if w.MaxTokens <= 0 && pm.Supports.MaxOutputTokens > 0 {
		w.MaxTokens = pm.Supports.MaxOutputTokens
	}
	return pm.Price.Estimate(w, kind)
}

// IsZero reports whether p prices nothing: every call is free.
func (p Price) IsZero() bool {
	return p.Input == 0 && p.CachedInput == 0 && p.Output == 0 && p.Request == 0 &&
		len(p.Images) == 0 && p.Second == 0 && p.Characters == 0
}

// Validate reports the first negative amount of p, or an image price
// keyed by nothing, as a *FieldError naming its field.
func (p Price) Validate() error {
	if err := p.validate(); err != nil {
		return err
	}
	return nil
}

func (p Price) validate() *FieldError {
	for _, f := range []struct {
		name string
		v    Money
	}{
		{"input", p.Input}, {"cached_input", p.CachedInput}, {"output", p.Output},
		{"request", p.Request}, {"second", p.Second}, {"characters", p.Characters},
	} {
		if f.v < 0 {
			return invalidf(f.name, "must not be negative")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(p.Images)) {
		size, quality, two := strings.Cut(k, "/")
		switch v := p.Images[k]; {
		case size == "" || two && (quality == "" || size == "*") || strings.Contains(quality, "/"):
			return invalidf("images", "%q is not a size, size/quality or *", k)
		case v < 0:
			return invalidf("images."+k, "must not be negative")
		}
	}
	return nil
}
