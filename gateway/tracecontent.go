package gateway

import (
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/weir-gateway/weir/internal/fastjson"
)

// Content capture: when the operator opts in (Config.CaptureContent), an
// attempt's client span records the messages sent upstream
// (gen_ai.input.messages, gen_ai.system_instructions) and those that
// came back (gen_ai.output.messages), as the GenAI conventions shape
// them (docs/observability.md), each attribute a JSON string of at most
// maxContentBytes and a little: text past the bound is cut, marked with
// truncatedMark, and what follows it left out. Only message text, tool
// calls and tool results are recorded: an image, audio or a file is a
// part of its type alone, and nothing of a request's headers or other
// fields is.

// maxContentBytes bounds each content attribute of a span.
const maxContentBytes = 16 << 10

// maxOutputChoices bounds the choices of an answer whose output is
// captured: the others are left out.
const maxOutputChoices = 8

// truncatedMark ends a text cut at maxContentBytes.
const truncatedMark = "…[truncated]"

// attrContentTruncated marks a span whose content attributes were cut.
const attrContentTruncated = attribute.Key("weir.content.truncated")

// boundedJSON is a JSON text built up to maxContentBytes of content.
type boundedJSON struct {
	b   []byte
	cut bool
}

// full reports whether nothing more goes in (and if so, that what was
// to go in is cut).
func (j *boundedJSON) full() bool {
	if len(j.b) >= maxContentBytes {
		j.cut = true
	}
	return j.cut
}

// str appends s as a JSON string, cut (and marked) where it passes the
// bound.
func (j *boundedJSON) str(s string) {
	if left := maxContentBytes - len(j.b); len(s) > left {
		left = max(left, 0)
		for left > 0 && !utf8.RuneStart(s[left]) {
			left--
		}
		s, j.cut = s[:left]+truncatedMark, true
	}
	j.b = fastjson.AppendString(j.b, s)
}

// raw appends v, a JSON value read as it is, if it fits, else as a
// string cut to fit.
func (j *boundedJSON) raw(v []byte) {
	if len(v) == 0 {
		j.b = append(j.b, "null"...)
		return
	}
	switch {
	case len(j.b)+len(v) <= maxContentBytes:
		j.b = append(j.b, v...)
	case v[0] == '"':
		j.str(stringOf(v))
	default:
		j.str(string(v))
	}
}

// textPart appends a text part.
func (j *boundedJSON) textPart(s string) {
	j.b = append(j.b, `{"type":"text","content":`...)
	j.str(s)
	j.b = append(j.b, '}')
}

// stringOf reads the JSON string v ("" if it is not one).
func stringOf(v []byte) string {
	if len(v) == 0 || v[0] != '"' {
		return ""
	}
	return fastjson.NewReader(v).String()
}

// block is the fields of a message, an item or a content block that
// content capture reads: each value as it is in the body.
type block struct {
	typ, role, text, content, id, name, args, input, toolCallID, toolCalls, output, function []byte
}

// readBlock reads the object at rd into a block, skipping the rest.
func readBlock(rd *fastjson.Reader) (b block, ok bool) {
	if rd.Peek() != '{' {
		rd.Skip()
		return b, false
	}
	rd.Open('{')
	for rd.Next('}') {
		var v *[]byte
		switch string(rd.Key()) {
		case "type":
			v = &b.typ
		case "role":
			v = &b.role
		case "text":
			v = &b.text
		case "content":
			v = &b.content
		case "id":
			v = &b.id
		case "call_id", "tool_use_id", "tool_call_id":
			v = &b.toolCallID
		case "name":
			v = &b.name
		case "arguments":
			v = &b.args
		case "input":
			v = &b.input
		case "tool_calls":
			v = &b.toolCalls
		case "output":
			v = &b.output
		case "function":
			v = &b.function
		default:
			rd.Skip()
			continue
		}
		*v = rd.Span()
	}
	return b, !rd.Failed()
}

// inputMessages are the attributes of the request body sent upstream:
// gen_ai.input.messages from Chat Completions' and Messages' messages or
// the Responses API's input, and gen_ai.system_instructions from
// Messages' system or the Responses API's instructions.
func inputMessages(body []byte) []attribute.KeyValue {
	var msgs, system boundedJSON
	msgs.b = append(msgs.b, '[')
	rd := fastjson.NewReader(body)
	if rd.Peek() != '{' {
		return nil
	}
	rd.Open('{')
	for rd.Next('}') {
		switch string(rd.Key()) {
		case "messages":
			eachElement(rd, func(rd *fastjson.Reader) {
				if b, ok := readBlock(rd); ok {
					msgs.message(b)
				}
			})
		case "input": // the Responses API's: a string or items
			if rd.Peek() == '"' {
				msgs.message(block{role: []byte(`"user"`), content: rd.Span()})
				continue
			}
			eachElement(rd, func(rd *fastjson.Reader) {
				if b, ok := readBlock(rd); ok {
					if m, ok := itemMessage(b); ok {
						msgs.message(m)
					}
				}
			})
		case "system", "instructions":
			system.b = append(system.b[:0], '[')
			system.parts(rd.Span())
			system.b = append(system.b, ']')
		default:
			rd.Skip()
		}
	}
	msgs.b = append(msgs.b, ']')
	var attrs []attribute.KeyValue
	if len(msgs.b) > 2 {
		attrs = append(attrs, semconv.GenAIInputMessagesKey.String(string(msgs.b)))
	}
	if len(system.b) > 2 {
		attrs = append(attrs, semconv.GenAISystemInstructionsKey.String(string(system.b)))
	}
	if msgs.cut || system.cut {
		attrs = append(attrs, attrContentTruncated.Bool(true))
	}
	return attrs
}

// eachElement calls f on each element of the array at rd (skipping
// anything else).
func eachElement(rd *fastjson.Reader, f func(*fastjson.Reader)) {
	if rd.Peek() != '[' {
		rd.Skip()
		return
	}
	rd.Open('[')
	for rd.Next(']') && !rd.Failed() {
		f(rd)
	}
}

// itemMessage is a Responses input item as a message: a message item
// as it is, a function call as the assistant's tool call, its output
// as the tool's response; false for any other item (reasoning, say).
func itemMessage(b block) (block, bool) {
	switch stringOf(b.typ) {
	case "function_call":
		return block{role: []byte(`"assistant"`), typ: b.typ, toolCallID: b.toolCallID, name: b.name, args: b.args}, true
	case "function_call_output":
		return block{role: []byte(`"tool"`), toolCallID: b.toolCallID, content: b.output}, true
	case "", "message":
		if b.role == nil {
			b.role = []byte(`"user"`)
		}
		return b, true
	}
	return block{}, false
}

// message appends b, a message, as the conventions' ChatMessage: its
// role and parts. A tool's message (Chat Completions' role tool) is a
// tool call response; a function call item a tool call.
func (j *boundedJSON) message(b block) {
	if j.full() {
		j.cut = true
		return
	}
	if len(j.b) > 1 {
		j.b = append(j.b, ',')
	}
	role := stringOf(b.role)
	j.b = append(j.b, `{"role":`...)
	j.b = fastjson.AppendString(j.b, role)
	j.b = append(j.b, `,"parts":[`...)
	n := len(j.b)
	switch {
	case role == "tool":
		j.toolResponse(b.toolCallID, b.content)
	case stringOf(b.typ) == "function_call":
		j.toolCall(b.toolCallID, stringOf(b.name), b.args)
	default:
		j.parts(b.content)
	}
	if b.toolCalls != nil {
		eachElement(fastjson.NewReader(b.toolCalls), func(rd *fastjson.Reader) {
			if tc, ok := readBlock(rd); ok && !j.full() {
				j.comma(n)
				j.chatToolCall(tc)
			}
		})
	}
	j.b = append(j.b, "]}"...)
}

// comma separates a part from the one before, if any (the parts began
// at start).
func (j *boundedJSON) comma(start int) {
	if len(j.b) > start {
		j.b = append(j.b, ',')
	}
}

// parts appends content, a string or an array of content blocks, as
// parts.
func (j *boundedJSON) parts(content []byte) {
	if len(content) == 0 || content[0] == 'n' {
		return
	}
	if content[0] == '"' {
		j.textPart(stringOf(content))
		return
	}
	start := len(j.b)
	eachElement(fastjson.NewReader(content), func(rd *fastjson.Reader) {
		if b, ok := readBlock(rd); ok && !j.full() {
			j.comma(start)
			j.part(b)
		}
	})
}

// part appends a content block: text, a tool use or result (Messages'),
// or anything else as a part of its type alone.
func (j *boundedJSON) part(b block) {
	switch typ := stringOf(b.typ); typ {
	case "text", "input_text", "output_text":
		j.textPart(stringOf(b.text))
	case "tool_use":
		j.toolCall(b.id, stringOf(b.name), b.input)
	case "tool_result":
		j.toolResponse(b.toolCallID, b.content)
	default:
		j.b = append(j.b, `{"type":`...)
		j.b = fastjson.AppendString(j.b, typ)
		j.b = append(j.b, '}')
	}
}

// chatToolCall appends one of Chat Completions' tool_calls.
func (j *boundedJSON) chatToolCall(tc block) {
	var fn block
	if tc.function != nil {
		fn, _ = readBlock(fastjson.NewReader(tc.function))
	}
	j.toolCall(tc.id, stringOf(fn.name), fn.args)
}

// toolCall appends a tool call part.
func (j *boundedJSON) toolCall(id []byte, name string, args []byte) {
	j.b = append(j.b, `{"type":"tool_call","id":`...)
	j.b = fastjson.AppendString(j.b, stringOf(id))
	j.b = append(j.b, `,"name":`...)
	j.b = fastjson.AppendString(j.b, name)
	j.b = append(j.b, `,"arguments":`...)
	j.raw(args)
	j.b = append(j.b, '}')
}

// toolResponse appends a tool call response part: its text if it is
// one, else the value as it is.
func (j *boundedJSON) toolResponse(id, content []byte) {
	j.b = append(j.b, `{"type":"tool_call_response","id":`...)
	j.b = fastjson.AppendString(j.b, stringOf(id))
	j.b = append(j.b, `,"response":`...)
	if len(content) > 0 && content[0] == '"' {
		j.str(stringOf(content))
	} else {
		j.raw(content)
	}
	j.b = append(j.b, '}')
}

// outputCapture is an answer's output as it is read: each choice's text
// and other parts, up to maxContentBytes in all, and its finish reason.
type outputCapture struct {
	choices []outputChoice
	// size is the bytes held, text and parts; cut: some were left out.
	size int
	cut  bool
}

// outputChoice is one choice's output: its text, its other parts
// (rendered), its finish reason.
type outputChoice struct {
	text   []byte
	parts  boundedJSON
	reason string
}

// choice is choice i, nil (and the output cut) past maxOutputChoices.
func (o *outputCapture) choice(i int) *outputChoice {
	if i < 0 || i >= maxOutputChoices {
		o.cut = true
		return nil
	}
	for len(o.choices) <= i {
		o.choices = append(o.choices, outputChoice{})
	}
	return &o.choices[i]
}

// text adds s to choice i's text, within the bound.
func (o *outputCapture) text(i int, s string) {
	ch := o.choice(i)
	if ch == nil || s == "" || o.cut {
		return
	}
	if left := maxContentBytes - o.size; len(s) > left {
		for left > 0 && !utf8.RuneStart(s[left]) {
			left--
		}
		ch.text = append(append(ch.text, s[:left]...), truncatedMark...)
		o.size, o.cut = maxContentBytes, true
		return
	}
	ch.text = append(ch.text, s...)
	o.size += len(s)
}

// reason notes choice i's finish reason.
func (o *outputCapture) reason(i int, r string) {
	if ch := o.choice(i); ch != nil {
		ch.reason = r
	}
}

// message reads a Chat Completions choice's message (whole) or delta
// (a chunk's): its content, and a whole message's tool calls.
func (o *outputCapture) message(v []byte, i int, whole bool) {
	b, ok := readBlock(fastjson.NewReader(v))
	if !ok {
		return
	}
	if len(b.content) > 0 && b.content[0] == '"' {
		o.text(i, stringOf(b.content))
	}
	ch := o.choice(i)
	if !whole || ch == nil || b.toolCalls == nil {
		return
	}
	eachElement(fastjson.NewReader(b.toolCalls), func(rd *fastjson.Reader) {
		if tc, ok := readBlock(rd); ok {
			o.part(ch, func(j *boundedJSON) { j.chatToolCall(tc) })
		}
	})
}

// part adds to ch a part that add renders, if the bound leaves room
// (else it notes the cut): its bytes count against the bound as text's
// do.
func (o *outputCapture) part(ch *outputChoice, add func(*boundedJSON)) {
	if o.cut || o.size >= maxContentBytes {
		o.cut = true
		return
	}
	n := len(ch.parts.b)
	ch.parts.comma(0)
	add(&ch.parts)
	o.size += len(ch.parts.b) - n
}

// blocks reads a whole Messages answer's content blocks into choice i.
func (o *outputCapture) blocks(v []byte, i int) {
	ch := o.choice(i)
	eachElement(fastjson.NewReader(v), func(rd *fastjson.Reader) {
		b, ok := readBlock(rd)
		if !ok || ch == nil {
			return
		}
		if stringOf(b.typ) == "text" {
			o.text(i, stringOf(b.text))
		} else {
			o.part(ch, func(j *boundedJSON) { j.part(b) })
		}
	})
}

// items reads a Responses answer's output items (a stream's, in its
// last event, whole) into choice 0, replacing what an earlier event
// said.
func (o *outputCapture) items(v []byte) {
	*o = outputCapture{}
	ch := o.choice(0)
	eachElement(fastjson.NewReader(v), func(rd *fastjson.Reader) {
		b, ok := readBlock(rd)
		if !ok {
			return
		}
		switch stringOf(b.typ) {
		case "message":
			eachElement(fastjson.NewReader(b.content), func(rd *fastjson.Reader) {
				if p, ok := readBlock(rd); ok && stringOf(p.typ) == "output_text" {
					o.text(0, stringOf(p.text))
				}
			})
		case "function_call":
			o.part(ch, func(j *boundedJSON) { j.toolCall(b.toolCallID, stringOf(b.name), b.args) })
		}
	})
}

// json is the output as gen_ai.output.messages, "" if there is none;
// reasons are the answer's finish reasons, the first choice's if it
// named none itself (a Responses answer's status).
func (o *outputCapture) json(reasons []string) string {
	if len(o.choices) > 0 && o.choices[0].reason == "" && len(reasons) > 0 {
		o.choices[0].reason = reasons[0]
	}
	var j boundedJSON
	j.b = append(j.b, '[')
	for i := range o.choices {
		ch := &o.choices[i]
		if len(ch.text) == 0 && len(ch.parts.b) == 0 && ch.reason == "" {
			continue
		}
		if len(j.b) > 1 {
			j.b = append(j.b, ',')
		}
		j.b = append(j.b, `{"role":"assistant","parts":[`...)
		if len(ch.text) > 0 {
			j.b = append(j.b, `{"type":"text","content":`...)
			j.b = fastjson.AppendString(j.b, string(ch.text))
			j.b = append(j.b, '}')
			if len(ch.parts.b) > 0 {
				j.b = append(j.b, ',')
			}
		}
		j.b = append(j.b, ch.parts.b...)
		j.b = append(j.b, `],"finish_reason":`...)
		j.b = fastjson.AppendString(j.b, ch.reason)
		j.b = append(j.b, '}')
	}
	if len(j.b) == 1 {
		return ""
	}
	j.b = append(j.b, ']')
	return string(j.b)
}
