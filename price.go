package weir

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
