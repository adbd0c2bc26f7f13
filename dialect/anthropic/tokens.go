package anthropic

// imageTokens is what an image counts in EstimateInputTokens: about what
// Anthropic counts for an image of the largest size it takes unscaled.
const imageTokens = 1600

// EstimateInputTokens is Weir's estimate of the input tokens of r, for
// count_tokens where no upstream counts them: about four bytes of text a
// token (the system prompt, text, tool inputs and results, thinking, the
// tools' definitions), a few tokens a message, and a flat count an image.
func EstimateInputTokens(r *Request) int64 {
	var bytes int64
	n := int64(3)
	var blocks func(c Content)
	blocks = func(c Content) {
		for _, b := range c {
			switch b.Type {
			case BlockImage:
				n += imageTokens
			default:
				bytes += int64(len(b.Text) + len(b.Input) + len(b.Thinking) + len(b.Name))
				blocks(b.Content)
			}
		}
	}
	blocks(r.System)
	for _, m := range r.Messages {
		n += 3
		blocks(m.Content)
	}
	for _, t := range r.Tools {
		n += 10
		bytes += int64(len(t.Name) + len(t.Description) + len(t.InputSchema))
	}
	return n + (bytes+3)/4
}
