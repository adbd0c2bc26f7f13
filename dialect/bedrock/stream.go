package bedrock

import (
	"encoding/json"
	"errors"

	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/weir-gateway/weir/openaiwire"
)

// Stream translates a ConverseStream's events to chat.completion.chunk
// events, one event at a time as they arrive:
//
//	messageStart                 the role chunk
//	contentBlockStart (toolUse)  a tool call's first chunk: index, id, name
//	contentBlockDelta text       a content chunk
//	contentBlockDelta toolUse    a chunk of that tool call's arguments
//	messageStop                  the finish reason, kept for metadata
//	metadata                     the finish chunk, with the usage
//
// The finish chunk waits for metadata, which follows messageStop, so that
// it carries the usage: on itself when the client did not ask for usage
// (a field OpenAI's clients ignore, which lets the gateway settle exact
// tokens), or in a usage chunk of its own after it, with no choices, as
// stream_options.include_usage asks. contentBlockStop and reasoning
// deltas make no chunk. Not safe for concurrent use.
type Stream struct {
	meta         Meta
	includeUsage bool
	// tools maps a content block's index to its tool call's index
	// among the answer's tool calls.
	tools   map[int32]int
	started bool // the role was sent
	finish  string
	usage   *openaiwire.Usage
	ended   bool // the finish chunk was sent
}

// NewStream returns a translator for one stream.
func NewStream(m Meta, includeUsage bool) *Stream {
	return &Stream{meta: m, includeUsage: includeUsage, tools: map[int32]int{}}
}

// ErrUnfinished is a stream that ended before its messageStop.
var ErrUnfinished = errors.New("the ConverseStream ended before its messageStop")

// Event appends to b the chunks ev makes, none or more.
func (s *Stream) Event(b []byte, ev types.ConverseStreamOutput) []byte {
	switch ev := ev.(type) {
	case *types.ConverseStreamOutputMemberMessageStart:
		if !s.started {
			b = s.role(b)
		}
	case *types.ConverseStreamOutputMemberContentBlockStart:
		tu, ok := ev.Value.Start.(*types.ContentBlockStartMemberToolUse)
		if !ok {
			break
		}
		b = s.role(b)
		k := s.toolIndex(ev.Value.ContentBlockIndex)
		b = s.chunk(b, openaiwire.Delta{ToolCalls: []openaiwire.ToolCall{{
			Index: &k, ID: deref(tu.Value.ToolUseId), Type: "function",
			Function: openaiwire.FunctionCall{Name: deref(tu.Value.Name)},
		}}}, nil, nil)
	case *types.ConverseStreamOutputMemberContentBlockDelta:
		switch d := ev.Value.Delta.(type) {
		case *types.ContentBlockDeltaMemberText:
			if d.Value == "" {
				break
			}
			b = s.role(b)
			text := d.Value
			b = s.chunk(b, openaiwire.Delta{Content: &text}, nil, nil)
		case *types.ContentBlockDeltaMemberToolUse:
			b = s.role(b)
			k := s.toolIndex(ev.Value.ContentBlockIndex)
			b = s.chunk(b, openaiwire.Delta{ToolCalls: []openaiwire.ToolCall{{
				Index: &k, Function: openaiwire.FunctionCall{Arguments: deref(d.Value.Input)},
			}}}, nil, nil)
		}
	case *types.ConverseStreamOutputMemberMessageStop:
		s.finish = FinishReason(ev.Value.StopReason)
		if s.usage != nil {
			b = s.end(b)
		}
	case *types.ConverseStreamOutputMemberMetadata:
		s.usage = UsageOf(ev.Value.Usage)
		if s.finish != "" {
			b = s.end(b)
		}
	}
	return b
}

// End appends what closes the stream once ConverseStream's has ended
// whole: the finish chunk if metadata did not bring it, and [DONE]. It
// fails with ErrUnfinished if no messageStop came.
func (s *Stream) End(b []byte) ([]byte, error) {
	if s.finish == "" {
		return b, ErrUnfinished
	}
	if !s.ended {
		b = s.end(b)
	}
	return append(b, "data: [DONE]\n\n"...), nil
}

// Usage is the usage metadata reported; nil before it came.
func (s *Stream) Usage() *openaiwire.Usage { return s.usage }

func (s *Stream) toolIndex(block *int32) int {
	var i int32
	if block != nil {
		i = *block
	}
	k, ok := s.tools[i]
	if !ok {
		k = len(s.tools)
		s.tools[i] = k
	}
	return k
}

// role sends the role chunk, once.
func (s *Stream) role(b []byte) []byte {
	if s.started {
		return b
	}
	s.started = true
	empty := ""
	return s.chunk(b, openaiwire.Delta{Role: "assistant", Content: &empty}, nil, nil)
}

// end sends the finish chunk and the usage, once.
func (s *Stream) end(b []byte) []byte {
	if s.ended {
		return b
	}
	s.ended = true
	b = s.role(b)
	finish := s.finish
	if !s.includeUsage {
		return s.chunk(b, openaiwire.Delta{}, &finish, s.usage)
	}
	b = s.chunk(b, openaiwire.Delta{}, &finish, nil)
	if s.usage != nil {
		b = s.event(b, openaiwire.ChatChunk{ID: s.meta.ID, Object: "chat.completion.chunk", Created: s.meta.Created,
			Model: s.meta.Model, Choices: []openaiwire.ChunkChoice{}, Usage: s.usage})
	}
	return b
}

func (s *Stream) chunk(b []byte, d openaiwire.Delta, finish *string, u *openaiwire.Usage) []byte {
	return s.event(b, openaiwire.ChatChunk{
		ID: s.meta.ID, Object: "chat.completion.chunk", Created: s.meta.Created, Model: s.meta.Model,
		Choices: []openaiwire.ChunkChoice{{Delta: d, Logprobs: openaiwire.Null, FinishReason: finish}},
		Usage:   u,
	})
}

func (s *Stream) event(b []byte, c openaiwire.ChatChunk) []byte {
	js, _ := json.Marshal(c) // strings, numbers and raw null: cannot fail
	b = append(b, "data: "...)
	b = append(b, js...)
	return append(b, "\n\n"...)
}
