package tokens

import (
	"sync"

	"github.com/weir-gateway/weir"
)

// Prompt is a JSON request body's prompt, counted (CountJSON) in each
// encoding once, when it is first asked for: a request that may go to
// candidates of two encodings is counted in both, one whose candidates
// share one is counted once. It is safe for concurrent use.
type Prompt struct {
	body   []byte
	mu     sync.Mutex
	counts [3]int64 // by slot, 0: not counted yet
}

// NewPrompt is the prompt of body, which must not change while the
// Prompt is used.
func NewPrompt(body []byte) *Prompt { return &Prompt{body: body} }

// Init makes p, not yet used, the prompt of body as NewPrompt does: for
// a Prompt held inside a value that is allocated anyway.
func (p *Prompt) Init(body []byte) {
	p.body, p.counts = body, [3]int64{}
}

// Tokens is the prompt's count in t's encoding (the estimate for an
// encoding this package does not carry). It is at least 1.
func (p *Prompt) Tokens(t weir.Tokenizer) int64 {
	i := slot(t)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.counts[i] == 0 {
		p.counts[i] = max(CountJSON(t, p.body), 1)
	}
	return p.counts[i]
}

// slot is t's index in Prompt.counts.
func slot(t weir.Tokenizer) int {
	switch t {
	case weir.TokenizerO200k:
		return 1
	case weir.TokenizerCL100k:
		return 2
	}
	return 0
}
