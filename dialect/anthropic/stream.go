package anthropic

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/weir-gateway/weir/openaiwire"
)

// StreamError is an error event in a Messages stream: the upstream
// failed after its answer began.
type StreamError struct {
	Detail ErrorDetail
}

func (e *StreamError) Error() string { return e.Detail.Type + ": " + e.Detail.Message }

// ChatStream reads a Messages stream (Anthropic's SSE events) and yields
// it as a Chat Completions stream, event by event as the events arrive:
// a role chunk for message_start, a content, reasoning_content or
// tool-call chunk for each delta, a chunk with the finish reason and a
// chunk with the usage (as stream_options.include_usage has it) for the
// message's end, then [DONE]. An error event ends it with a *StreamError;
// an upstream that ends without message_stop ends it without [DONE].
type ChatStream struct {
	up      io.ReadCloser
	rd      *bufio.Reader
	created int64
	out     []byte // translated, not yet read
	err     error  // what Read returns once out is read
	data    []byte // the current event's data lines

	id, model string
	usage     Usage
	// blocks maps a content block's index to what it carries: a tool
	// call's index among the message's calls, or -1 for text, -2 for
	// thinking, -3 for a block Chat Completions has no form for.
	blocks map[int]int
	tools  int
	finish string
}

const (
	carriesText     = -1
	carriesThinking = -2
	carriesNothing  = -3
)

// NewChatStream translates the stream up; created is the chunks' Unix
// time. Closing it closes up.
func NewChatStream(up io.ReadCloser, created int64) *ChatStream {
	return &ChatStream{up: up, rd: bufio.NewReaderSize(up, 16<<10), created: created, blocks: map[int]int{}, finish: finishStop}
}

// Read implements io.Reader.
func (s *ChatStream) Read(p []byte) (int, error) {
	for len(s.out) == 0 && s.err == nil {
		s.step()
	}
	if len(s.out) == 0 {
		return 0, s.err
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}

// Close closes the upstream stream.
func (s *ChatStream) Close() error { return s.up.Close() }

// maxLine bounds one line of the upstream's stream.
const maxLine = 4 << 20

// step reads one line of the upstream's stream and translates the event
// it ends, if it ends one.
func (s *ChatStream) step() {
	line, err := s.readLine()
	if err != nil {
		if err == io.EOF && len(s.data) > 0 {
			s.dispatch()
		}
		if s.err == nil {
			s.err = err
		}
		return
	}
	line = bytes.TrimRight(line, "\r\n")
	switch {
	case len(line) == 0:
		if len(s.data) > 0 {
			s.dispatch()
		}
	case bytes.HasPrefix(line, []byte("data:")):
		d := bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))
		if len(s.data) > 0 {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, d...)
	}
	// event:, id:, retry: and comments: the data says what the event is.
}

func (s *ChatStream) readLine() ([]byte, error) {
	line, err := s.rd.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		return line, err
	}
	buf := append([]byte(nil), line...)
	for err == bufio.ErrBufferFull {
		if len(buf) > maxLine {
			return nil, errors.New("a line of the upstream's stream is too long")
		}
		line, err = s.rd.ReadSlice('\n')
		buf = append(buf, line...)
	}
	return buf, err
}

// dispatch translates the event whose data has been read.
func (s *ChatStream) dispatch() {
	var ev Event
	err := json.Unmarshal(s.data, &ev)
	s.data = s.data[:0]
	if err != nil {
		s.err = &StreamError{Detail: ErrorDetail{Type: ErrAPI, Message: "the upstream sent an event that is not JSON"}}
		return
	}
	switch ev.Type {
	case EventMessageStart:
		if m := ev.Message; m != nil {
			s.id, s.model, s.usage = m.ID, m.Model, m.Usage
		}
		role := "assistant"
		empty := ""
		s.chunk(&openaiwire.Delta{Role: role, Content: &empty}, nil)
	case EventContentBlockStart:
		s.blockStart(ev)
	case EventContentBlockDelta:
		s.blockDelta(ev)
	case EventMessageDelta:
		if d := ev.Delta; d != nil && d.StopReason != nil {
			s.finish = FinishReason(*d.StopReason)
		}
		if u := ev.Usage; u != nil {
			s.usage.OutputTokens = u.OutputTokens
			for _, f := range []struct {
				from *int64
				to   *int64
			}{{u.InputTokens, &s.usage.InputTokens}, {u.CacheReadInputTokens, &s.usage.CacheReadInputTokens}, {u.CacheCreationInputTokens, &s.usage.CacheCreationInputTokens}} {
				if f.from != nil {
					*f.to = *f.from
				}
			}
		}
	case EventMessageStop:
		finish := s.finish
		s.chunk(&openaiwire.Delta{}, &finish)
		s.usageChunk()
		s.out = append(s.out, "data: [DONE]\n\n"...)
		s.err = io.EOF
	case EventError:
		d := ErrorDetail{Type: ErrAPI, Message: "the upstream failed mid-stream"}
		if ev.Error != nil {
			d = *ev.Error
		}
		s.err = &StreamError{Detail: d}
	}
	// ping, content_block_stop and events of types to come: nothing to say.
}

func (s *ChatStream) blockStart(ev Event) {
	b := ev.ContentBlock
	if b == nil {
		return
	}
	switch b.Type {
	case BlockText:
		s.blocks[ev.Index] = carriesText
		if b.Text != "" {
			s.chunk(&openaiwire.Delta{Content: &b.Text}, nil)
		}
	case BlockThinking:
		s.blocks[ev.Index] = carriesThinking
		if b.Thinking != "" {
			s.chunk(&openaiwire.Delta{ReasoningContent: &b.Thinking}, nil)
		}
	case BlockToolUse:
		i := s.tools
		s.tools++
		s.blocks[ev.Index] = i
		s.chunk(&openaiwire.Delta{ToolCalls: []openaiwire.ToolCall{{Index: &i, ID: b.ID, Type: "function", Function: openaiwire.FunctionCall{Name: b.Name}}}}, nil)
	default:
		s.blocks[ev.Index] = carriesNothing
	}
}

func (s *ChatStream) blockDelta(ev Event) {
	d := ev.Delta
	carries, ok := s.blocks[ev.Index]
	if d == nil || !ok {
		return
	}
	switch {
	case d.Type == DeltaText && carries == carriesText:
		s.chunk(&openaiwire.Delta{Content: &d.Text}, nil)
	case d.Type == DeltaThinking && carries == carriesThinking:
		s.chunk(&openaiwire.Delta{ReasoningContent: &d.Thinking}, nil)
	case d.Type == DeltaInputJSON && carries >= 0 && d.PartialJSON != "":
		i := carries
		s.chunk(&openaiwire.Delta{ToolCalls: []openaiwire.ToolCall{{Index: &i, Function: openaiwire.FunctionCall{Arguments: d.PartialJSON}}}}, nil)
	}
	// signature_delta: a signature has no Chat Completions form.
}

// chunk adds a chat.completion.chunk with one choice.
func (s *ChatStream) chunk(d *openaiwire.Delta, finish *string) {
	s.write(openaiwire.ChatChunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model,
		Choices: []openaiwire.ChunkChoice{{Delta: *d, FinishReason: finish}}})
}

// usageChunk adds the chunk with the usage and no choices.
func (s *ChatStream) usageChunk() {
	s.write(openaiwire.ChatChunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model,
		Choices: []openaiwire.ChunkChoice{}, Usage: chatUsageOf(s.usage)})
}

func (s *ChatStream) write(a openaiwire.ChatChunk) {
	b, _ := json.Marshal(a) // plain values: cannot fail
	s.out = append(s.out, "data: "...)
	s.out = append(s.out, b...)
	s.out = append(s.out, "\n\n"...)
}
