package gemini

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/weir-gateway/weir/openaiwire"
)

// ErrIncomplete is a stream that ended before every answer in it had
// finished: Gemini's streams have no end marker but their finish reasons.
var ErrIncomplete = errors.New("gemini: the stream ended before its answer finished")

// Stream translates one streamGenerateContent stream (alt=sse) into
// chat.completion.chunk events, as its events arrive: Event takes the
// data of each, End closes the stream. Each text or function call that
// arrives is a chunk at once; a finish reason is a chunk with an empty
// delta. The usage report goes where the client asked for it (its own
// chunk, with no choices, before [DONE]), or else on each finish chunk,
// where the gateway reads it and clients pass over it.
type Stream struct {
	meta         AnswerMeta
	includeUsage bool

	ids     *idSource // from the first event on
	model   string
	choices map[int]*choiceState
	usage   *UsageMetadata
	// sent is the usage last sent on a finish chunk.
	sent *UsageMetadata
}

type choiceState struct {
	finished bool
	calls    int
}

// NewStream starts translating a stream. includeUsage is the client's
// stream_options.include_usage.
func NewStream(meta AnswerMeta, includeUsage bool) *Stream {
	return &Stream{meta: meta, includeUsage: includeUsage, choices: map[int]*choiceState{}}
}

// Event translates the data of one event, appending the SSE events it
// makes to b. A blocked prompt (the first event, with no candidate) is a
// *BlockedError.
func (s *Stream) Event(b, data []byte) ([]byte, error) {
	var r Response
	if err := json.Unmarshal(data, &r); err != nil {
		return b, fmt.Errorf("gemini: decode a stream event: %w", err)
	}
	if len(r.Candidates) == 0 && r.PromptFeedback != nil && r.PromptFeedback.BlockReason != "" {
		return b, &BlockedError{Reason: r.PromptFeedback.BlockReason}
	}
	if s.ids == nil {
		s.ids = newIDs(r.ResponseID)
		s.model = modelOf(r, s.meta)
	}
	if r.UsageMetadata != nil {
		s.usage = r.UsageMetadata
	}
	for _, c := range r.Candidates {
		st := s.choices[c.Index]
		first := st == nil
		if first {
			st = &choiceState{}
			s.choices[c.Index] = st
		}
		var text strings.Builder
		var calls []openaiwire.ToolCall
		if c.Content != nil {
			for _, p := range c.Content.Parts {
				switch {
				case p.FunctionCall != nil:
					tc := toolCall(p, s.ids)
					i := st.calls
					tc.Index = &i
					st.calls++
					calls = append(calls, tc)
				case p.Text != "" && !p.Thought:
					text.WriteString(p.Text)
				}
			}
		}
		if first || text.Len() > 0 || len(calls) > 0 {
			var d openaiwire.Delta
			if first {
				d.Role = "assistant"
			}
			if text.Len() > 0 || len(calls) == 0 {
				t := text.String()
				d.Content = &t
			}
			d.ToolCalls = calls
			b = s.appendChunk(b, []openaiwire.ChunkChoice{{Index: c.Index, Delta: d}}, nil)
		}
		if c.FinishReason != "" && !st.finished {
			st.finished = true
			finish := FinishReason(c.FinishReason, st.calls > 0)
			var u *openaiwire.Usage
			if !s.includeUsage && s.usage != nil {
				u, s.sent = usageOf(s.usage), s.usage
			}
			b = s.appendChunk(b, []openaiwire.ChunkChoice{{Index: c.Index, FinishReason: &finish}}, u)
		}
	}
	return b, nil
}

// End closes the stream once the upstream's has ended, appending the
// usage chunk (or, if the client asked for none, the usage that came
// after the last finish chunk) and [DONE] to b. A stream with an answer
// that never finished, or with no event at all, is ErrIncomplete.
func (s *Stream) End(b []byte) ([]byte, error) {
	if len(s.choices) == 0 {
		return b, ErrIncomplete
	}
	for _, st := range s.choices {
		if !st.finished {
			return b, ErrIncomplete
		}
	}
	if s.usage != nil && (s.includeUsage || s.sent != s.usage) {
		b = s.appendChunk(b, []openaiwire.ChunkChoice{}, usageOf(s.usage))
	}
	return append(b, "data: [DONE]\n\n"...), nil
}

func (s *Stream) appendChunk(b []byte, choices []openaiwire.ChunkChoice, u *openaiwire.Usage) []byte {
	c := openaiwire.ChatChunk{ID: s.ids.completion(), Object: "chat.completion.chunk", Created: s.meta.Created, Model: s.model,
		SystemFingerprint: openaiwire.Null, Choices: choices, Usage: u}
	j, _ := json.Marshal(c) // plain values and valid raw JSON: cannot fail
	b = append(b, "data: "...)
	b = append(b, j...)
	return append(b, "\n\n"...)
}
