package gateway

import (
	"bytes"
	"encoding/json"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/tokens"
)

// usage is the part of an upstream answer that says what it cost: Chat
// Completions' usage, the Responses API's (a response object's, or in a
// stream the one its last event carries) or Anthropic's Messages API's
// (a message's; in a stream, message_start's and then message_delta's),
// whose input and output tokens usageOf reads as the prompt and
// completion tokens. Anthropic counts the input read from and written to
// its prompt cache apart from the rest: all of it is the prompt, and what
// was read from the cache its cached part, as Chat Completions' and the
// Responses API's details count it (the native dialects' adapters put
// their cached counts there too).
type usage struct {
	PromptTokens             int64        `json:"prompt_tokens"`
	CompletionTokens         int64        `json:"completion_tokens"`
	TotalTokens              int64        `json:"total_tokens"`
	InputTokens              int64        `json:"input_tokens"`
	OutputTokens             int64        `json:"output_tokens"`
	CacheCreationInputTokens int64        `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64        `json:"cache_read_input_tokens"`
	PromptTokensDetails      tokenDetails `json:"prompt_tokens_details"`
	InputTokensDetails       tokenDetails `json:"input_tokens_details"`

	// CachedTokens is the cached part of the prompt, as normal reads it.
	CachedTokens int64 `json:"-"`
	// Images is how many images an answer holds (its data), for an
	// images request.
	Images int64 `json:"-"`
	// counted: the upstream reported no usage, and these counts are the
	// gateway's own (a stream's prompt estimate and chunks).
	counted bool
}

// tokenDetails is the part of a usage's details that prices read.
type tokenDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

// normal is u with the Responses API's or the Messages API's counts as
// Chat Completions'.
func (u usage) normal() usage {
	// Each dialect says it in one of the three; the others are 0.
	u.CachedTokens = max(u.PromptTokensDetails.CachedTokens, u.InputTokensDetails.CachedTokens, u.CacheReadInputTokens, 0)
	u.PromptTokensDetails, u.InputTokensDetails = tokenDetails{}, tokenDetails{}
	if u.PromptTokens == 0 && u.CompletionTokens == 0 {
		input := tokens.Add(max(u.InputTokens, 0), max(u.CacheCreationInputTokens, 0))
		u.PromptTokens, u.CompletionTokens = tokens.Add(input, max(u.CacheReadInputTokens, 0)), u.OutputTokens
	}
	u.InputTokens, u.OutputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens = 0, 0, 0, 0
	return u
}

// update is u updated by later, a Messages stream's message_delta
// usage: its counts are cumulative, and it may leave out the input ones
// that message_start gave.
func (u usage) update(later usage) usage {
	if later.PromptTokens > 0 {
		u.PromptTokens = later.PromptTokens
	}
	if later.CompletionTokens > 0 {
		u.CompletionTokens = later.CompletionTokens
	}
	if later.TotalTokens > 0 {
		u.TotalTokens = later.TotalTokens
	}
	if later.CachedTokens > 0 {
		u.CachedTokens = later.CachedTokens
	}
	return u
}

// total is what the answer cost; an upstream's numbers are trusted no
// more than a client's (negative ones count as none, the sum saturates).
func (u usage) total() int64 {
	if u.TotalTokens > 0 {
		return u.TotalTokens
	}
	return tokens.Add(max(u.PromptTokens, 0), max(u.CompletionTokens, 0))
}

// usageOf reads the usage field of a JSON answer (or SSE chunk).
func usageOf(body []byte) (usage, bool) {
	i := lastUsageKey(body)
	if i < 0 {
		return usage{}, false
	}
	// OpenAI answers end with their usage: decode just the value after the
	// last "usage" key (a quote inside a string is escaped, so this is a
	// key), and parse the whole answer only if that does not work out.
	if rest := bytes.TrimLeft(body[i+len(`"usage"`):], " \t\r\n"); len(rest) > 0 && rest[0] == ':' {
		u, ok := decodeUsage(rest[1:])
		if !ok {
			var up *usage
			if json.NewDecoder(bytes.NewReader(rest[1:])).Decode(&up) == nil && up != nil {
				u, ok = *up, true
			}
		}
		if ok {
			if n := u.normal(); n.total() > 0 {
				return n, true
			}
		}
	}
	var v struct {
		Usage *usage `json:"usage"`
	}
	if json.Unmarshal(body, &v) != nil || v.Usage == nil {
		return usage{}, false
	}
	return v.Usage.normal(), true
}

// usageKey is the key usageOf looks for.
const usageKey = `"usage"`

// usageKeySkip is, for each byte, how far lastUsageKey may move its
// window back when the window's first byte is that byte and the window
// is not usageKey: to the next place where that byte could line up with
// an equal byte of usageKey (a Horspool skip, from the other end).
var usageKeySkip = func() (t [256]uint8) {
	for c := range t {
		t[c] = uint8(len(usageKey))
	}
	for k := len(usageKey) - 1; k >= 1; k-- {
		t[usageKey[k]] = uint8(k)
	}
	return t
}()

// lastUsageKey is bytes.LastIndex(b, usageKey). An answer's usage is at
// or near its end, and few of the bytes after it are usageKey's, so the
// window moves back by most of the key's length at each step where
// bytes.LastIndex hashes every byte it passes.
func lastUsageKey(b []byte) int {
	for i := len(b) - len(usageKey); i >= 0; {
		c := b[i]
		if c == '"' && string(b[i:i+len(usageKey)]) == usageKey {
			return i
		}
		i -= int(usageKeySkip[c])
	}
	return -1
}

// metered is what u used, for a price: its tokens, and the images it
// holds at the size and quality w asked for.
func (u usage) metered(w weir.Wants) weir.Metered {
	return weir.Metered{PromptTokens: u.PromptTokens, CachedTokens: u.CachedTokens, CompletionTokens: u.CompletionTokens,
		Images: u.Images, Size: w.Size, Quality: w.Quality}
}

// imagesOf counts the images of an images answer: the entries of its
// data array (0 if it has none, or is not JSON).
func imagesOf(body []byte) int64 {
	var v struct {
		Data []struct{} `json:"data"` // counted, not kept
	}
	if json.Unmarshal(body, &v) != nil {
		return 0
	}
	return int64(len(v.Data))
}
