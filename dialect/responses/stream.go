package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/weir-gateway/weir/internal/fastjson"
	"github.com/weir-gateway/weir/openaiwire"
)

// The streamed events' types.
const (
	EventCreated          = "response.created"
	EventInProgress       = "response.in_progress"
	EventOutputItemAdded  = "response.output_item.added"
	EventContentPartAdded = "response.content_part.added"
	EventOutputTextDelta  = "response.output_text.delta"
	EventOutputTextDone   = "response.output_text.done"
	EventRefusalDelta     = "response.refusal.delta"
	EventRefusalDone      = "response.refusal.done"
	EventContentPartDone  = "response.content_part.done"
	EventArgumentsDelta   = "response.function_call_arguments.delta"
	EventArgumentsDone    = "response.function_call_arguments.done"
	EventOutputItemDone   = "response.output_item.done"
	EventCompleted        = "response.completed"
	EventIncomplete       = "response.incomplete"
	EventFailed           = "response.failed"
)

// ResponseEvent is a lifecycle event: created, in_progress and the
// terminal completed, incomplete or failed, with the response as it
// stands.
type ResponseEvent struct {
	Type           string    `json:"type"`
	Response       *Response `json:"response"`
	SequenceNumber int       `json:"sequence_number"`
}

// OutputItemEvent is output_item.added and output_item.done.
type OutputItemEvent struct {
	Type           string      `json:"type"`
	OutputIndex    int         `json:"output_index"`
	Item           *OutputItem `json:"item"`
	SequenceNumber int         `json:"sequence_number"`
}

// ContentPartEvent is content_part.added and content_part.done.
type ContentPartEvent struct {
	Type           string      `json:"type"`
	ItemID         string      `json:"item_id"`
	OutputIndex    int         `json:"output_index"`
	ContentIndex   int         `json:"content_index"`
	Part           *OutputPart `json:"part"`
	SequenceNumber int         `json:"sequence_number"`
}

// TextEvent is output_text.delta (Delta) and output_text.done (Text),
// with no log probabilities; and refusal.delta (Delta) and refusal.done
// (Refusal), which have none at all.
type TextEvent struct {
	Type           string  `json:"type"`
	ItemID         string  `json:"item_id"`
	OutputIndex    int     `json:"output_index"`
	ContentIndex   int     `json:"content_index"`
	Delta          *string `json:"delta,omitempty"`
	Text           *string `json:"text,omitempty"`
	Refusal        *string `json:"refusal,omitempty"`
	Logprobs       *[]any  `json:"logprobs,omitempty"`
	SequenceNumber int     `json:"sequence_number"`
}

// ArgumentsEvent is function_call_arguments.delta (Delta) and
// function_call_arguments.done (Name, Arguments).
type ArgumentsEvent struct {
	Type           string  `json:"type"`
	ItemID         string  `json:"item_id"`
	OutputIndex    int     `json:"output_index"`
	Delta          *string `json:"delta,omitempty"`
	Name           string  `json:"name,omitempty"`
	Arguments      *string `json:"arguments,omitempty"`
	SequenceNumber int     `json:"sequence_number"`
}

// Stream translates a streamed Chat Completions answer into the
// Responses API's events, chunk by chunk as they arrive: each method
// returns the events it makes, framed as server-sent events
// ("event: <type>\ndata: <json>\n\n"), to be sent at once. Nothing is
// held back but the text and arguments so far, which the done events and
// the final response repeat whole.
//
// Output items follow one another: a message item for the text (and a
// refusal), a function_call item for each tool call; an item is done when
// the next begins or the model finishes.
type Stream struct {
	t     *Translation
	resp  Response
	seq   int
	begun bool
	ended bool
	// open is the item being written, nil between items.
	open *streamItem
	// calls are the function_call items by their Chat Completions index.
	calls  map[int]*streamItem
	finish string
	out    []byte
}

// streamItem is one output item being written.
type streamItem struct {
	index int // in resp.Output
	// part is the index of the content part being written, -1 for none.
	part int
	// announced: output_item.added was sent (a function_call waits for
	// its name).
	announced bool
	// text is the open part's text (or refusal), args a function call's
	// arguments, as they came: written into the response when the part or
	// the item closes (sync), not grown a delta at a time, which
	// would copy a long answer once per delta.
	text, args strings.Builder
}

// NewStream is the translation of a Chat Completions stream.
func (t *Translation) NewStream() *Stream {
	return &Stream{t: t, calls: map[int]*streamItem{}}
}

// Response is the response as it stands: whole once the stream ended.
func (s *Stream) Response() Response {
	s.sync(s.open)
	return s.resp
}

// Ended reports whether the terminal event was made.
func (s *Stream) Ended() bool { return s.ended }

// emit frames ev as an event of type typ.
func (s *Stream) emit(typ string, ev any) {
	data, err := json.Marshal(ev)
	if err != nil {
		// The events are strings, numbers and the request's own JSON,
		// which decoded once: they encode.
		panic("responses: encode event: " + err.Error())
	}
	s.out = append(s.out, "event: "...)
	s.out = append(s.out, typ...)
	s.out = append(s.out, "\ndata: "...)
	s.out = append(s.out, data...)
	s.out = append(s.out, "\n\n"...)
	s.seq++
}

// emitText is emit of a text event, the one made for every chunk of
// text, written without reflection.
func (s *Stream) emitText(ev *TextEvent) {
	s.out = append(s.out, "event: "...)
	s.out = append(s.out, ev.Type...)
	s.out = append(s.out, "\ndata: "...)
	s.out = ev.appendJSON(s.out)
	s.out = append(s.out, "\n\n"...)
	s.seq++
}

// appendJSON appends ev as json.Marshal writes it.
func (ev *TextEvent) appendJSON(b []byte) []byte {
	b = append(b, `{"type":`...)
	b = fastjson.AppendString(b, ev.Type)
	b = append(b, `,"item_id":`...)
	b = fastjson.AppendString(b, ev.ItemID)
	b = append(b, `,"output_index":`...)
	b = strconv.AppendInt(b, int64(ev.OutputIndex), 10)
	b = append(b, `,"content_index":`...)
	b = strconv.AppendInt(b, int64(ev.ContentIndex), 10)
	for _, f := range [...]struct {
		key string
		s   *string
	}{{`,"delta":`, ev.Delta}, {`,"text":`, ev.Text}, {`,"refusal":`, ev.Refusal}} {
		if f.s != nil {
			b = fastjson.AppendString(append(b, f.key...), *f.s)
		}
	}
	if ev.Logprobs != nil {
		b = append(b, `,"logprobs":`...)
		if *ev.Logprobs != nil && len(*ev.Logprobs) == 0 {
			b = append(b, "[]"...)
		} else {
			b, _ = fastjson.AppendValue(b, *ev.Logprobs) // decoded JSON: encodes
		}
	}
	b = append(b, `,"sequence_number":`...)
	b = strconv.AppendInt(b, int64(ev.SequenceNumber), 10)
	return append(b, '}')
}

// take returns what was emitted and starts over.
func (s *Stream) take() []byte {
	out := s.out
	s.out = nil
	return out
}

func (s *Stream) begin(model string) {
	if s.begun {
		return
	}
	s.begun = true
	s.resp = s.t.response(model)
	snapshot := s.resp
	s.emit(EventCreated, ResponseEvent{Type: EventCreated, Response: &snapshot, SequenceNumber: s.seq})
	s.emit(EventInProgress, ResponseEvent{Type: EventInProgress, Response: &snapshot, SequenceNumber: s.seq})
}

// Chunk translates one Chat Completions chunk, the data of one event
// ("[DONE]" ends the stream). A chunk that is not one (an error the
// upstream sent in the stream, or not JSON) fails the response.
func (s *Stream) Chunk(data []byte) []byte {
	if s.ended {
		return nil
	}
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, []byte("[DONE]")) {
		return s.Done()
	}
	var c openaiwire.ChatChunk
	if err := openaiwire.UnmarshalChatChunk(data, &c); err != nil {
		return s.Fail("upstream_error", "the upstream sent a stream chunk that is not JSON")
	}
	if c.Error != nil {
		return s.Fail("upstream_error", "the upstream failed mid-stream: "+c.Error.Message)
	}
	s.begin(c.Model)
	if c.ServiceTier != "" && (s.resp.ServiceTier == nil || *s.resp.ServiceTier != c.ServiceTier) {
		// A copy, once for the stream unless it changes: c's own field
		// would take every chunk to the heap.
		s.resp.ServiceTier = new(c.ServiceTier)
	}
	if c.Usage != nil {
		s.resp.Usage = usageOf(c.Usage)
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // a Responses request asks for one answer
		}
		s.delta(ch.Delta)
		if f := finishReason(ch.FinishReason); f != "" {
			s.finish = f
			s.closeOpen()
		}
	}
	return s.take()
}

// delta translates one choice's delta.
func (s *Stream) delta(d openaiwire.Delta) {
	if d.Content != nil && *d.Content != "" {
		s.text(PartOutputText, *d.Content)
	}
	if d.Refusal != nil && *d.Refusal != "" {
		s.text(PartRefusal, *d.Refusal)
	}
	for _, tc := range d.ToolCalls {
		s.toolCall(tc)
	}
}

// text adds delta to the open message's part of type typ, opening the
// message and the part as needed.
func (s *Stream) text(typ, delta string) {
	if it := s.open; it == nil || s.resp.Output[it.index].Type != ItemMessage {
		s.closeOpen()
		s.openItem(OutputItem{Type: ItemMessage, ID: s.t.NewID("msg_"), Status: StatusInProgress, Role: "assistant"}, true)
	}
	it := s.open
	item := &s.resp.Output[it.index]
	if it.part >= 0 && item.Content[it.part].Type != typ {
		s.closePart(it)
	}
	if it.part < 0 {
		item.Content = append(item.Content, OutputPart{Type: typ})
		it.part = len(item.Content) - 1
		part := item.Content[it.part]
		s.emit(EventContentPartAdded, ContentPartEvent{Type: EventContentPartAdded, ItemID: item.ID, OutputIndex: it.index,
			ContentIndex: it.part, Part: &part, SequenceNumber: s.seq})
	}
	it.text.WriteString(delta)
	ev := TextEvent{Type: EventOutputTextDelta, ItemID: item.ID, OutputIndex: it.index, ContentIndex: it.part, Delta: &delta, SequenceNumber: s.seq}
	if typ == PartRefusal {
		ev.Type = EventRefusalDelta
	} else {
		ev.Logprobs = &[]any{}
	}
	s.emitText(&ev)
}

// toolCall adds one tool call's delta: the first of a call opens its
// function_call item, which is announced once its name is known.
func (s *Stream) toolCall(tc openaiwire.ToolCall) {
	n := 0
	if tc.Index != nil {
		n = *tc.Index
	}
	it, ok := s.calls[n]
	if !ok {
		s.closeOpen()
		id := tc.ID
		if id == "" {
			id = s.t.NewID("call_")
		}
		it = s.openItem(OutputItem{Type: ItemFunctionCall, ID: s.t.NewID("fc_"), Status: StatusInProgress, CallID: id}, false)
		s.calls[n] = it
	}
	item := &s.resp.Output[it.index]
	if item.Name == "" {
		item.Name = tc.Function.Name
	}
	if !it.announced && (item.Name != "" || tc.Function.Arguments != "") {
		s.announce(it)
	}
	if d := tc.Function.Arguments; d != "" {
		// A call's arguments arrive before the next call begins; one
		// that came after would still be added (and sent) here, and its
		// item's done events would not be repeated.
		it.args.WriteString(d)
		if it != s.open {
			item.Arguments = it.args.String()
		}
		s.emit(EventArgumentsDelta, ArgumentsEvent{Type: EventArgumentsDelta, ItemID: item.ID, OutputIndex: it.index, Delta: &d, SequenceNumber: s.seq})
	}
}

// openItem adds item to the output as the open one; announce sends its
// output_item.added now.
func (s *Stream) openItem(item OutputItem, announce bool) *streamItem {
	s.resp.Output = append(s.resp.Output, item)
	it := &streamItem{index: len(s.resp.Output) - 1, part: -1}
	s.open = it
	if announce {
		s.announce(it)
	}
	return it
}

func (s *Stream) announce(it *streamItem) {
	it.announced = true
	item := s.resp.Output[it.index]
	s.emit(EventOutputItemAdded, OutputItemEvent{Type: EventOutputItemAdded, OutputIndex: it.index, Item: &item, SequenceNumber: s.seq})
}

// sync writes what item it took in so far into the response: its open
// part's text, or its arguments.
func (s *Stream) sync(it *streamItem) {
	if it == nil {
		return
	}
	item := &s.resp.Output[it.index]
	if it.part >= 0 {
		if part := &item.Content[it.part]; part.Type == PartRefusal {
			part.Refusal = it.text.String()
		} else {
			part.Text = it.text.String()
		}
	}
	if item.Type == ItemFunctionCall {
		item.Arguments = it.args.String()
	}
}

// closePart ends the open part of the message it.
func (s *Stream) closePart(it *streamItem) {
	s.sync(it)
	it.text.Reset()
	item := &s.resp.Output[it.index]
	part := item.Content[it.part]
	ev := TextEvent{Type: EventOutputTextDone, ItemID: item.ID, OutputIndex: it.index, ContentIndex: it.part, SequenceNumber: s.seq}
	if part.Type == PartRefusal {
		ev.Type, ev.Refusal = EventRefusalDone, &part.Refusal
	} else {
		ev.Text, ev.Logprobs = &part.Text, &[]any{}
	}
	s.emit(ev.Type, ev)
	s.emit(EventContentPartDone, ContentPartEvent{Type: EventContentPartDone, ItemID: item.ID, OutputIndex: it.index,
		ContentIndex: it.part, Part: &part, SequenceNumber: s.seq})
	it.part = -1
}

// closeOpen ends the open item, if any: its status is completed, or
// incomplete when the model stopped short of finishing it.
func (s *Stream) closeOpen() {
	it := s.open
	if it == nil {
		return
	}
	s.open = nil
	item := &s.resp.Output[it.index]
	if item.Type == ItemMessage && it.part >= 0 {
		s.closePart(it)
	}
	if item.Type == ItemFunctionCall {
		if !it.announced {
			s.announce(it)
		}
		item.Arguments = it.args.String()
		args := item.Arguments
		s.emit(EventArgumentsDone, ArgumentsEvent{Type: EventArgumentsDone, ItemID: item.ID, OutputIndex: it.index,
			Name: item.Name, Arguments: &args, SequenceNumber: s.seq})
	}
	item.Status = itemStatus(s.finish)
	done := *item
	s.emit(EventOutputItemDone, OutputItemEvent{Type: EventOutputItemDone, OutputIndex: it.index, Item: &done, SequenceNumber: s.seq})
}

// Done ends the stream as the upstream finished it: the open item done,
// then response.completed, or response.incomplete when the model was cut
// short (max_output_tokens, a content filter).
func (s *Stream) Done() []byte {
	if s.ended {
		return nil
	}
	s.begin("")
	s.closeOpen()
	s.ended = true
	finished(&s.resp, s.finish)
	typ := EventCompleted
	if s.resp.Status == StatusIncomplete {
		typ = EventIncomplete
	}
	resp := s.resp
	s.emit(typ, ResponseEvent{Type: typ, Response: &resp, SequenceNumber: s.seq})
	return s.take()
}

// End ends the stream when the upstream's has ended: as Done if the model
// finished, else as failed (the upstream stopped short).
func (s *Stream) End() []byte {
	if s.ended {
		return nil
	}
	if s.finish != "" {
		return s.Done()
	}
	return s.Fail("upstream_error", "the upstream ended the stream before the answer was finished")
}

// Fail ends the stream with response.failed: the items so far, the one
// being written left incomplete, and the error (code is Weir's).
func (s *Stream) Fail(code, message string) []byte {
	if s.ended {
		return nil
	}
	s.begin("")
	s.ended = true
	if it := s.open; it != nil {
		s.sync(s.open)
		s.resp.Output[it.index].Status = StatusIncomplete
		s.open = nil
	}
	s.resp.Status = StatusFailed
	s.resp.Error = &ResponseError{Code: code, Message: message}
	resp := s.resp
	s.emit(EventFailed, ResponseEvent{Type: EventFailed, Response: &resp, SequenceNumber: s.seq})
	return s.take()
}

// Writer is a Stream behind an io.Writer: what is written to it is a
// Chat Completions stream's bytes, in pieces of any size; what it writes
// to W is the Responses events, as soon as the chunk they come of has
// arrived whole. Write returns W's error.
type Writer struct {
	W    io.Writer
	S    *Stream
	line []byte
}

// maxLine bounds one line of the stream: a chunk longer than this fails
// the response rather than grow without end.
const maxLine = 8 << 20

var errLineTooLong = errors.New("a stream line is over " + strconv.Itoa(maxLine) + " bytes")

func (w *Writer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 && !w.S.ended {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(w.line)+len(p) > maxLine {
				return n, w.send(w.S.Fail("upstream_error", errLineTooLong.Error()))
			}
			w.line = append(w.line, p...)
			break
		}
		var line []byte
		if len(w.line) > 0 {
			w.line = append(w.line, p[:i]...)
			line, w.line = w.line, w.line[:0]
		} else {
			line = p[:i]
		}
		p = p[i+1:]
		if err := w.send(w.lineEvents(line)); err != nil {
			return n, err
		}
	}
	return n, nil
}

// lineEvents is what one line of the stream makes: its data line's
// chunk translated; other lines (event names, comments, the blank line
// between events) make nothing.
func (w *Writer) lineEvents(line []byte) []byte {
	data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:"))
	if !ok {
		return nil
	}
	return w.S.Chunk(data)
}

func (w *Writer) send(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	_, err := w.W.Write(b)
	return err
}

// Close ends the stream when the upstream's has ended (Stream.End): a
// last line without its newline is read first.
func (w *Writer) Close() error {
	if len(w.line) > 0 && !w.S.ended {
		line := w.line
		w.line = nil
		if err := w.send(w.lineEvents(line)); err != nil {
			return err
		}
	}
	return w.send(w.S.End())
}

// Fail ends the stream with response.failed (Stream.Fail).
func (w *Writer) Fail(code, message string) error {
	return w.send(w.S.Fail(code, message))
}
