package gateway

import (
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/weir-gateway/weir/internal/fastjson"
)

// answerNotes is what a traced attempt's client span is told of the
// upstream's answer: the response's model and id, its finish reasons,
// and (when the operator opts in, tracecontent.go) its output. It reads
// a whole JSON answer, or a stream's chunks one by one as they pass,
// without holding them: Chat Completions' shape, Anthropic's Messages'
// (message_start's message, message_delta's delta) and the Responses
// API's (the response of its events). A traced attempt's callObs holds
// one; an untraced attempt's none, and it reads nothing.
type answerNotes struct {
	// model and id are the first the answer named.
	model, id string
	// reasons are the finish reasons in the order read; reasonsBuf
	// holds the first few without an allocation.
	reasons    []string
	reasonsBuf [2]string
	// status and incomplete are a Responses answer's status and
	// incomplete_details.reason: its finish reason, having no other.
	status, incomplete string
	// out, when content is captured, is the answer's output so far.
	out *outputCapture
	// held is a whole answer to be read as the span ends (hold), and
	// buf the pooled buffer it is in, if it is, given back after.
	held []byte
	buf  *[]byte
}

// newAnswerNotes are notes of the answer to come; capture: its output
// too.
func newAnswerNotes(capture bool) *answerNotes {
	a := &answerNotes{}
	a.reasons = a.reasonsBuf[:0]
	if capture {
		a.out = &outputCapture{}
	}
	return a
}

// read reads one JSON object: a whole answer or a stream's chunk. What
// it does not know it skips; it stops at what is malformed.
func (a *answerNotes) read(b []byte) {
	a.object(fastjson.NewReader(b), 0)
}

// object reads an object at depth: 0 the answer or chunk, 1 an object
// in it that holds more of the same (message_start's message, a
// Responses event's response, message_delta's and
// content_block_delta's delta).
func (a *answerNotes) object(rd *fastjson.Reader, depth int) {
	if rd.Peek() != '{' {
		rd.Skip()
		return
	}
	rd.Open('{')
	for rd.Next('}') {
		switch string(rd.Key()) {
		case "id":
			a.id = first(rd, a.id)
		case "model":
			a.model = first(rd, a.model)
		case "choices":
			a.choices(rd)
		case "stop_reason": // Messages'
			a.reason(0, rd.String())
		case "status": // the Responses API's
			a.status = rd.String()
		case "incomplete_details":
			a.incomplete = incompleteReason(rd)
		case "message", "response", "delta":
			if depth == 0 {
				a.object(rd, 1)
			} else {
				rd.Skip()
			}
		case "text": // content_block_delta's delta
			if a.out != nil && depth == 1 && rd.Peek() == '"' {
				a.out.text(0, rd.String())
			} else {
				rd.Skip()
			}
		case "content": // a whole Messages answer's blocks
			if a.out != nil {
				a.out.blocks(rd.Span(), 0)
			} else {
				rd.Skip()
			}
		case "output": // a Responses answer's items
			if a.out != nil {
				a.out.items(rd.Span())
			} else {
				rd.Skip()
			}
		default:
			rd.Skip()
		}
	}
}

// first is the string rd reads if had is "", else had (the value read
// is skipped): a stream's chunks repeat their model and id, read once.
func first(rd *fastjson.Reader, had string) string {
	if had != "" {
		rd.Skip()
		return had
	}
	return rd.String()
}

// choices reads Chat Completions' choices (a whole answer's or a
// chunk's): each one's finish reason, and its message or delta when the
// output is captured.
func (a *answerNotes) choices(rd *fastjson.Reader) {
	if rd.Peek() != '[' {
		rd.Skip()
		return
	}
	rd.Open('[')
	for i := 0; rd.Next(']'); i++ {
		if rd.Peek() != '{' {
			rd.Skip()
			continue
		}
		rd.Open('{')
		index := i
		for rd.Next('}') {
			switch key := string(rd.Key()); {
			case key == "finish_reason":
				a.reason(index, rd.String())
			case key == "index" && a.out != nil:
				index = int(rd.Int64())
			case (key == "message" || key == "delta") && a.out != nil:
				a.out.message(rd.Span(), index, key == "message")
			default:
				rd.Skip()
			}
		}
	}
}

// reason notes choice's finish reason r, if any.
func (a *answerNotes) reason(choice int, r string) {
	if r == "" {
		return
	}
	a.reasons = append(a.reasons, r)
	if a.out != nil {
		a.out.reason(choice, r)
	}
}

// incompleteReason reads a Responses answer's incomplete_details (or
// null): its reason.
func incompleteReason(rd *fastjson.Reader) string {
	if rd.Peek() != '{' {
		rd.Skip()
		return ""
	}
	rd.Open('{')
	var r string
	for rd.Next('}') {
		if string(rd.Key()) == "reason" {
			r = rd.String()
			continue
		}
		rd.Skip()
	}
	return r
}

// finishReasons are the answer's finish reasons: those it gave, or a
// Responses answer's incomplete reason or status.
func (a *answerNotes) finishReasons() []string {
	if len(a.reasons) == 0 {
		switch {
		case a.incomplete != "":
			a.reasons = append(a.reasons, a.incomplete)
		case a.status != "":
			a.reasons = append(a.reasons, a.status)
		}
	}
	return a.reasons
}

// hold keeps body, a whole answer that went out, to be read as the
// span ends (AppendAttrs), off the request's goroutine; buf is the
// answerBufs buffer body may be in, given back once it is read.
func (a *answerNotes) hold(body []byte, buf *[]byte) {
	a.held, a.buf = body, buf
}

// AppendAttrs implements tracing.Notes: it reads the answer held, if
// any, and appends what it read to attrs.
func (a *answerNotes) AppendAttrs(attrs []attribute.KeyValue) []attribute.KeyValue {
	if a.held != nil {
		a.read(a.held)
		a.held = nil
	}
	if a.buf != nil {
		answerBufs.Put(a.buf)
		a.buf = nil
	}
	return a.appendAttrs(attrs)
}

// appendAttrs is attrs with what a read.
func (a *answerNotes) appendAttrs(attrs []attribute.KeyValue) []attribute.KeyValue {
	if a.model != "" {
		attrs = append(attrs, semconv.GenAIResponseModel(a.model))
	}
	if a.id != "" {
		attrs = append(attrs, semconv.GenAIResponseID(a.id))
	}
	reasons := a.finishReasons()
	if len(reasons) > 0 {
		attrs = append(attrs, finishReasonsAttr(reasons))
	}
	if a.out != nil {
		if msgs := a.out.json(reasons); msgs != "" {
			attrs = append(attrs, semconv.GenAIOutputMessagesKey.String(msgs))
		}
		if a.out.cut {
			attrs = append(attrs, attrContentTruncated.Bool(true))
		}
	}
	return attrs
}
