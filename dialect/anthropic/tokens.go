package anthropic

import "github.com/weir-gateway/weir/tokens"

// imageTokens is what an image counts in EstimateInputTokens: about what
// Anthropic counts for an image of the largest size it takes unscaled.
const imageTokens = 1600

// EstimateInputTokens is Weir's estimate of the input tokens of r, for
// count_tokens where no upstream counts them: the text's estimate
// (tokens.Estimate: about four bytes a token, a token a Chinese,
// Japanese or Korean character) of the system prompt, text, tool inputs
// and results, thinking and the tools' definitions, a few tokens a
// message, and a flat count an image.
func EstimateInputTokens(r *Request) int64 {
	var text tokens.Estimator
	n := int64(3)
	var blocks func(c Content)
	blocks = func(c Content) {
		for _, b := range c {
			switch b.Type {
			case BlockImage:
				n += imageTokens
			default:
				text.Add(b.Text)
				text.AddBytes(b.Input)
				text.Add(b.Thinking)
				text.Add(b.Name)
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
		text.Add(t.Name)
		text.Add(t.Description)
		text.AddBytes(t.InputSchema)
	}
	return n + text.Tokens()
}
