package anthropic

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"

	"github.com/weir-gateway/weir/internal/fastjson"
	"github.com/weir-gateway/weir/openaiwire"
)

// MessagesStream translates a Chat Completions stream, written to it as
// it arrives, to a Messages stream written to w, chunk by chunk:
// message_start and a ping at the first chunk, a content block for each
// run of content (text), reasoning_content (thinking) or one tool call's
// arguments (tool_use), each opened, delta'd and stopped in turn, and
// message_delta (stop reason, usage) with message_stop at [DONE]. An
// error chunk ends it with an error event.
type MessagesStream struct {
	w    io.Writer
	line []byte // a line not yet ended

	started, ended bool
	id, model      string
	next           int    // the next content block's index
	open           int    // the open block's index; -1: none
	openKind       string // its type
	openTool       int    // its tool call's index, for tool_use
	tools          map[int]int
	stop           string
	usage          Usage
}

// NewMessagesStream writes the translation to w.
func NewMessagesStream(w io.Writer) *MessagesStream {
	return &MessagesStream{w: w, open: -1, tools: map[int]int{}, stop: StopEndTurn}
}

// Started reports whether the translation has written anything.
func (s *MessagesStream) Started() bool { return s.started }

// Write takes the next bytes of the Chat Completions stream; it returns
// w's error, if writing the translation failed.
func (s *MessagesStream) Write(p []byte) (int, error) {
	n := len(p)
	var out []byte
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(s.line)+len(p) > maxLine {
				s.line = s.line[:0] // a line past reason: not a chunk
			} else {
				s.line = append(s.line, p...)
			}
			break
		}
		line := p[:i]
		if len(s.line) > 0 {
			s.line = append(s.line, line...)
			line = s.line
		}
		out = s.translateLine(out, bytes.TrimRight(line, "\r"))
		s.line = s.line[:0]
		p = p[i+1:]
	}
	if len(out) == 0 {
		return n, nil
	}
	if _, err := s.w.Write(out); err != nil {
		return 0, err
	}
	return n, nil
}

func (s *MessagesStream) translateLine(out, line []byte) []byte {
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok || s.ended {
		return out
	}
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, []byte("[DONE]")) {
		return s.finish(out)
	}
	var c openaiwire.ChatChunk
	if openaiwire.UnmarshalChatChunk(data, &c) != nil {
		return out
	}
	if c.Error != nil {
		s.ended = true
		return appendEvent(out, EventError, errorEvent{Type: EventError, Error: ErrorDetail{Type: ErrAPI, Message: c.Error.Message}})
	}
	out = s.start(out, c.ID, c.Model)
	if c.Usage != nil {
		s.usage = usageOfChat(c.Usage)
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // one choice: the first
		}
		d := &ch.Delta
		if d.ReasoningContent != nil && *d.ReasoningContent != "" {
			out = s.into(out, BlockThinking, 0, Block{Type: BlockThinking})
			out = appendTextDelta(out, s.open, DeltaThinking, `,"thinking":`, *d.ReasoningContent)
		}
		if d.Content != nil && *d.Content != "" {
			out = s.into(out, BlockText, 0, Block{Type: BlockText})
			out = appendTextDelta(out, s.open, DeltaText, `,"text":`, *d.Content)
		}
		for _, tc := range d.ToolCalls {
			out = s.toolCall(out, tc)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.stop = StopReason(*ch.FinishReason)
		}
	}
	return out
}

// start writes message_start and a ping, once.
func (s *MessagesStream) start(out []byte, id, model string) []byte {
	if s.started {
		return out
	}
	s.started, s.id, s.model = true, id, model
	out = appendEvent(out, EventMessageStart, messageStart{Type: EventMessageStart, Message: Answer{
		ID: id, Type: "message", Role: "assistant", Model: model, Content: []Block{},
	}})
	return appendEvent(out, EventPing, typeOnly{EventPing})
}

// into makes the open block one of kind (for a tool_use, of tool call
// tool), stopping the open one and starting b if it is not.
func (s *MessagesStream) into(out []byte, kind string, tool int, b Block) []byte {
	if s.open >= 0 && s.openKind == kind && (kind != BlockToolUse || s.openTool == tool) {
		return out
	}
	out = s.stopBlock(out)
	s.open, s.openKind, s.openTool = s.next, kind, tool
	s.next++
	return appendEvent(out, EventContentBlockStart, blockStart{Type: EventContentBlockStart, Index: s.open, ContentBlock: b})
}

func (s *MessagesStream) stopBlock(out []byte) []byte {
	if s.open < 0 {
		return out
	}
	out = appendEvent(out, EventContentBlockStop, blockStop{Type: EventContentBlockStop, Index: s.open})
	s.open = -1
	return out
}

// toolCall translates one tool call delta: its first (with its id and
// name) starts a tool_use block, its arguments are input_json_delta.
func (s *MessagesStream) toolCall(out []byte, tc openaiwire.ToolCall) []byte {
	i := 0
	if tc.Index != nil {
		i = *tc.Index
	}
	index, seen := s.tools[i]
	if !seen {
		out = s.into(out, BlockToolUse, i, Block{Type: BlockToolUse, ID: tc.ID, Name: tc.Function.Name})
		index = s.open
		s.tools[i] = index
	} else if s.openKind == BlockToolUse && s.openTool == i {
		index = s.open
	}
	// (Arguments of a call whose block was stopped, which upstreams do
	// not send, go to its block's index all the same: clients gather
	// deltas by index.)
	if tc.Function.Arguments == "" {
		return out
	}
	return appendEvent(out, EventContentBlockDelta, blockDelta{Type: EventContentBlockDelta, Index: index, Delta: jsonDelta{DeltaInputJSON, tc.Function.Arguments}})
}

// finish stops the open block and writes message_delta and message_stop.
func (s *MessagesStream) finish(out []byte) []byte {
	out = s.start(out, s.id, s.model)
	out = s.stopBlock(out)
	s.ended = true
	u := s.usage
	out = appendEvent(out, EventMessageDelta, messageDelta{Type: EventMessageDelta,
		Delta: stopDelta{StopReason: s.stop},
		Usage: DeltaUsage{InputTokens: &u.InputTokens, OutputTokens: u.OutputTokens, CacheReadInputTokens: &u.CacheReadInputTokens},
	})
	return appendEvent(out, EventMessageStop, typeOnly{EventMessageStop})
}

// End ends the translation of a stream whose upstream part is over
// without [DONE] having closed it: the message is finished with what is
// known. It writes nothing if the stream ended or never started.
func (s *MessagesStream) End() error {
	if s.ended || !s.started {
		return nil
	}
	_, err := s.w.Write(s.finish(nil))
	return err
}

// Fail ends the stream with an error event.
func (s *MessagesStream) Fail(d ErrorDetail) error {
	if s.ended {
		return nil
	}
	s.ended = true
	_, err := s.w.Write(appendEvent(nil, EventError, errorEvent{Type: EventError, Error: d}))
	return err
}

// The events as written: exactly the fields Anthropic sends.
type (
	typeOnly struct {
		Type string `json:"type"`
	}
	messageStart struct {
		Type    string `json:"type"`
		Message Answer `json:"message"`
	}
	blockStart struct {
		Type         string `json:"type"`
		Index        int    `json:"index"`
		ContentBlock Block  `json:"content_block"`
	}
	blockDelta struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
		Delta any    `json:"delta"`
	}
	textDelta struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	thinkingDelta struct {
		Type     string `json:"type"`
		Thinking string `json:"thinking"`
	}
	jsonDelta struct {
		Type        string `json:"type"`
		PartialJSON string `json:"partial_json"`
	}
	blockStop struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	stopDelta struct {
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	}
	messageDelta struct {
		Type  string     `json:"type"`
		Delta stopDelta  `json:"delta"`
		Usage DeltaUsage `json:"usage"`
	}
	errorEvent struct {
		Type  string      `json:"type"`
		Error ErrorDetail `json:"error"`
	}
)

// appendEvent appends one SSE event: its type and its data.
func appendEvent(b []byte, typ string, v any) []byte {
	data, _ := json.Marshal(v) // plain values: cannot fail
	b = append(b, "event: "...)
	b = append(b, typ...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}

// appendTextDelta appends a content_block_delta of a text or thinking
// delta, the event made for every chunk of text, as appendEvent writes
// it, without reflection: key is the delta's text field, with its
// comma.
func appendTextDelta(b []byte, index int, typ, key, text string) []byte {
	b = append(b, "event: "+EventContentBlockDelta+"\ndata: "+`{"type":"`+EventContentBlockDelta+`","index":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, `,"delta":{"type":`...)
	b = fastjson.AppendString(b, typ)
	b = append(b, key...)
	b = fastjson.AppendString(b, text)
	return append(b, "}}\n\n"...)
}

// ErrorEvent is an error event, for a stream that fails before or
// without a MessagesStream.
func ErrorEvent(d ErrorDetail) []byte {
	return appendEvent(nil, EventError, errorEvent{Type: EventError, Error: d})
}
