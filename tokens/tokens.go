// Package tokens counts a request's prompt tokens: in an OpenAI encoding
// (o200k_base, cl100k_base) with github.com/tiktoken-go/tokenizer, whose
// encodings are compiled into the binary (nothing is fetched), each
// loaded on its first use; and, for a model whose encoding Weir does not
// carry, by an estimate that counts a token for each character of three
// or more bytes in UTF-8 (Chinese, Japanese, Korean, Thai, Devanagari,
// emoji) and four bytes a token for the rest.
//
// A body is counted as JSON (CountJSON): the text of its string values
// in the encoding, the rest of it (keys, punctuation, numbers, and
// base64 data such as an inline image) at four bytes a token.
package tokens

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/tiktoken-go/tokenizer/codec"
	"github.com/weir-gateway/weir"
)

// codecs load each encoding once, on its first use: a catalog that names
// none loads none.
var codecs = map[weir.Tokenizer]func() *codec.Codec{
	weir.TokenizerO200k:  loader(weir.TokenizerO200k, codec.NewO200kBase),
	weir.TokenizerCL100k: loader(weir.TokenizerCL100k, codec.NewCl100kBase),
}

// loaded says which encodings have been loaded, by slot.
var loaded [3]atomic.Bool

func loader(t weir.Tokenizer, load func() *codec.Codec) func() *codec.Codec {
	return sync.OnceValue(func() *codec.Codec {
		loaded[slot(t)].Store(true)
		return load()
	})
}

// Count is the number of tokens of text in t's encoding; the estimate
// for TokenizerEstimate, or an encoding this package does not carry.
func Count(t weir.Tokenizer, text string) int64 {
	if load := codecs[t]; load != nil {
		if n, err := load().Count(text); err == nil {
			return int64(n)
		}
	}
	return Estimate(text)
}

// Estimate is an estimate of text's tokens for an encoding Weir does not
// carry: a token for each character of three or more bytes in UTF-8
// (where BPE encodings spend about a token a character, more for the
// older ones), and four bytes a token for the rest (English, code,
// Latin, Cyrillic and Greek letters), rounded up.
func Estimate[T ~string | ~[]byte](text T) int64 {
	var e Estimator
	addText(&e, text)
	return e.Tokens()
}

// Estimator adds up the estimate of several texts, as Estimate counts
// them joined. The zero value counts nothing.
type Estimator struct{ wide, other int64 }

// Add counts text.
func (e *Estimator) Add(text string) { addText(e, text) }

// AddBytes counts text.
func (e *Estimator) AddBytes(text []byte) { addText(e, text) }

// Tokens is the estimate of the texts added.
func (e *Estimator) Tokens() int64 { return e.wide + (e.other+3)/4 }

func addText[T ~string | ~[]byte](e *Estimator, text T) {
	for i := 0; i < len(text); {
		c := text[i]
		i++
		if c < 0xE0 {
			e.other++
			continue
		}
		// The lead byte of a character of three or four bytes: one token,
		// whatever its continuation bytes.
		e.wide++
		for i < len(text) && text[i]&0xC0 == 0x80 {
			i++
		}
	}
}

// Add is a+b for token counts a, b >= 0, saturating at the int64
// maximum: a count that big can never be admitted against a TPM limit
// anyway, and one that wrapped negative would be refused as invalid.
func Add(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
