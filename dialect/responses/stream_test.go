package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// event is one translated event: its type and its data.
type event struct {
	typ  string
	data map[string]any
}

// parseEvents splits translated output into its events, checking the
// framing: an event line naming the data's type, sequence numbers from 0
// without a gap, and no [DONE].
func parseEvents(t *testing.T, out []byte) []event {
	t.Helper()
	if bytes.Contains(out, []byte("[DONE]")) {
		t.Errorf("the events hold a [DONE]:\n%s", out)
	}
	var evs []event
	for i, block := range strings.Split(strings.TrimSuffix(string(out), "\n\n"), "\n\n") {
		if block == "" {
			continue
		}
		lines := strings.Split(block, "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "event: ") || !strings.HasPrefix(lines[1], "data: ") {
			t.Fatalf("event %d is not an event line and a data line: %q", i, block)
		}
		var data map[string]any
		if err := json.Unmarshal([]byte(strings.TrimPrefix(lines[1], "data: ")), &data); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		typ := strings.TrimPrefix(lines[0], "event: ")
		if data["type"] != typ {
			t.Errorf("event %d is %q but its data's type is %v", i, typ, data["type"])
		}
		if data["sequence_number"] != float64(i) {
			t.Errorf("event %d (%s) has sequence_number %v", i, typ, data["sequence_number"])
		}
		evs = append(evs, event{typ, data})
	}
	return evs
}

func types(evs []event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.typ)
	}
	return out
}

// chunk is a Chat Completions stream chunk of choices (and usage) as an
// SSE event.
func chunk(choices, usage string) string {
	s := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[` + choices + `]`
	if usage != "" {
		s += `,"usage":` + usage
	}
	return s + "}\n\n"
}

func delta(d, finish string) string {
	if finish == "" {
		finish = "null"
	} else {
		finish = `"` + finish + `"`
	}
	return `{"index":0,"delta":` + d + `,"logprobs":null,"finish_reason":` + finish + `}`
}

// translate feeds a Chat Completions stream to a Writer whole and ends
// it, returning the events.
func translate(t *testing.T, tr *Translation, stream string) []byte {
	t.Helper()
	var out bytes.Buffer
	w := &Writer{W: &out, S: tr.NewStream()}
	if _, err := w.Write([]byte(stream)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

const streamUsage = `{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":0}}`

// A text answer, byte for byte as OpenAI's own stream has it.
func TestStreamText(t *testing.T) {
	t.Parallel()
	in := chunk(delta(`{"role":"assistant","content":"","refusal":null}`, ""), "") +
		chunk(delta(`{"content":"Hel"}`, ""), "") +
		chunk(delta(`{"content":"lo"}`, ""), "") +
		chunk(delta(`{}`, "stop"), "") +
		chunk("", streamUsage) +
		"data: [DONE]\n\n"
	got := translate(t, testTranslation(t, `{"model":"m","input":"hi","stream":true}`), in)
	const head = `"id":"resp_1","object":"response","created_at":1700000000,`
	const echo = `"background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"model":"gpt-x",`
	const tail = `"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"service_tier":null,"store":false,"temperature":null,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":null,"truncation":"disabled",`
	const item = `{"id":"msg_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Hello"}],"role":"assistant"}`
	want := `event: response.created
data: {"type":"response.created","response":{` + head + `"status":"in_progress",` + echo + `"output":[],` + tail + `"usage":null,"user":null,"metadata":{}},"sequence_number":0}

event: response.in_progress
data: {"type":"response.in_progress","response":{` + head + `"status":"in_progress",` + echo + `"output":[],` + tail + `"usage":null,"user":null,"metadata":{}},"sequence_number":1}

event: response.output_item.added
data: {"type":"response.output_item.added","output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"},"sequence_number":2}

event: response.content_part.added
data: {"type":"response.content_part.added","item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""},"sequence_number":3}

event: response.output_text.delta
data: {"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hel","logprobs":[],"sequence_number":4}

event: response.output_text.delta
data: {"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"lo","logprobs":[],"sequence_number":5}

event: response.output_text.done
data: {"type":"response.output_text.done","item_id":"msg_1","output_index":0,"content_index":0,"text":"Hello","logprobs":[],"sequence_number":6}

event: response.content_part.done
data: {"type":"response.content_part.done","item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":"Hello"},"sequence_number":7}

event: response.output_item.done
data: {"type":"response.output_item.done","output_index":0,"item":` + item + `,"sequence_number":8}

event: response.completed
data: {"type":"response.completed","response":{` + head + `"status":"completed",` + echo + `"output":[` + item + `],` + tail + `"usage":{"input_tokens":9,"input_tokens_details":{"cached_tokens":4},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":11},"user":null,"metadata":{}},"sequence_number":9}

`
	if string(got) != want {
		t.Errorf("events\n got %s\nwant %s", got, want)
	}
	parseEvents(t, got)
}

// Tool calls, as OpenAI streams them: each call's id and name first,
// then its arguments in pieces; the next call begins when one ends.
func TestStreamToolCalls(t *testing.T) {
	t.Parallel()
	in := chunk(delta(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"weather","arguments":""}}]}`, ""), "") +
		chunk(delta(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}`, ""), "") +
		chunk(delta(`{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}`, ""), "") +
		chunk(delta(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"time","arguments":"{}"}}]}`, ""), "") +
		chunk(delta(`{}`, "tool_calls"), "") +
		chunk("", streamUsage) +
		"data: [DONE]\n\n"
	evs := parseEvents(t, translate(t, testTranslation(t, `{"model":"m","input":"hi","stream":true}`), in))
	want := []string{EventCreated, EventInProgress,
		EventOutputItemAdded, EventArgumentsDelta, EventArgumentsDelta, EventArgumentsDone, EventOutputItemDone,
		EventOutputItemAdded, EventArgumentsDelta, EventArgumentsDone, EventOutputItemDone,
		EventCompleted}
	if got := types(evs); !slices.Equal(got, want) {
		t.Fatalf("events %v\nwant %v", got, want)
	}
	added := evs[2].data["item"].(map[string]any)
	if added["type"] != "function_call" || added["call_id"] != "call_a" || added["name"] != "weather" || added["arguments"] != "" ||
		added["status"] != "in_progress" || added["id"] != "fc_1" {
		t.Errorf("first item added: %v", added)
	}
	if d := evs[3].data; d["delta"] != `{"city":` || d["item_id"] != "fc_1" || d["output_index"] != 0.0 {
		t.Errorf("first delta: %v", d)
	}
	if d := evs[5].data; d["arguments"] != `{"city":"Paris"}` || d["name"] != "weather" || d["item_id"] != "fc_1" {
		t.Errorf("first arguments done: %v", d)
	}
	if item := evs[6].data["item"].(map[string]any); item["arguments"] != `{"city":"Paris"}` || item["status"] != "completed" {
		t.Errorf("first item done: %v", item)
	}
	if item := evs[7].data["item"].(map[string]any); item["call_id"] != "call_b" || item["name"] != "time" || evs[7].data["output_index"] != 1.0 {
		t.Errorf("second item added: %v", evs[7].data)
	}
	final := evs[11].data["response"].(map[string]any)
	out := final["output"].([]any)
	if len(out) != 2 || out[0].(map[string]any)["arguments"] != `{"city":"Paris"}` || out[1].(map[string]any)["call_id"] != "call_b" {
		t.Errorf("final output: %v", out)
	}
	if final["status"] != "completed" || final["usage"].(map[string]any)["input_tokens"] != 9.0 {
		t.Errorf("final response: %v", final)
	}
}

// A call whose name comes after its id is announced with its name.
func TestStreamToolCallNameLater(t *testing.T) {
	t.Parallel()
	in := chunk(delta(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"arguments":""}}]}`, ""), "") +
		chunk(delta(`{"tool_calls":[{"index":0,"function":{"name":"weather","arguments":"{}"}}]}`, ""), "") +
		chunk(delta(`{}`, "tool_calls"), "") + "data: [DONE]\n\n"
	evs := parseEvents(t, translate(t, testTranslation(t, `{"model":"m","input":"hi","stream":true}`), in))
	if got, want := types(evs), []string{EventCreated, EventInProgress, EventOutputItemAdded, EventArgumentsDelta, EventArgumentsDone, EventOutputItemDone, EventCompleted}; !slices.Equal(got, want) {
		t.Fatalf("events %v\nwant %v", got, want)
	}
	if item := evs[2].data["item"].(map[string]any); item["name"] != "weather" || item["call_id"] != "call_a" {
		t.Errorf("item added: %v", item)
	}
}

// Text and then a call: the message is done before the call begins.
func TestStreamTextThenToolCall(t *testing.T) {
	t.Parallel()
	in := chunk(delta(`{"role":"assistant","content":"Looking."}`, ""), "") +
		chunk(delta(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"weather","arguments":"{}"}}]}`, ""), "") +
		chunk(delta(`{}`, "tool_calls"), "") + "data: [DONE]\n\n"
	evs := parseEvents(t, translate(t, testTranslation(t, `{"model":"m","input":"hi","stream":true}`), in))
	want := []string{EventCreated, EventInProgress,
		EventOutputItemAdded, EventContentPartAdded, EventOutputTextDelta, EventOutputTextDone, EventContentPartDone, EventOutputItemDone,
		EventOutputItemAdded, EventArgumentsDelta, EventArgumentsDone, EventOutputItemDone, EventCompleted}
	if got := types(evs); !slices.Equal(got, want) {
		t.Fatalf("events %v\nwant %v", got, want)
	}
	if evs[8].data["output_index"] != 1.0 {
		t.Errorf("the call is output %v, want 1", evs[8].data["output_index"])
	}
}

// A refusal streams as refusal events in its own part.
func TestStreamRefusal(t *testing.T) {
	t.Parallel()
	in := chunk(delta(`{"role":"assistant","content":null,"refusal":""}`, ""), "") +
		chunk(delta(`{"refusal":"I can"}`, ""), "") +
		chunk(delta(`{"refusal":"not."}`, ""), "") +
		chunk(delta(`{}`, "stop"), "") + "data: [DONE]\n\n"
	evs := parseEvents(t, translate(t, testTranslation(t, `{"model":"m","input":"hi","stream":true}`), in))
	want := []string{EventCreated, EventInProgress, EventOutputItemAdded, EventContentPartAdded, EventRefusalDelta, EventRefusalDelta,
		EventRefusalDone, EventContentPartDone, EventOutputItemDone, EventCompleted}
	if got := types(evs); !slices.Equal(got, want) {
		t.Fatalf("events %v\nwant %v", got, want)
	}
	if d := evs[6].data; d["refusal"] != "I cannot." {
		t.Errorf("refusal done: %v", d)
	}
	if p := evs[7].data["part"].(map[string]any); p["type"] != "refusal" || p["refusal"] != "I cannot." {
		t.Errorf("part done: %v", p)
	}
}

// Cut short by max_output_tokens: the item and the response are
// incomplete, and the terminal event says so.
func TestStreamIncomplete(t *testing.T) {
	t.Parallel()
	in := chunk(delta(`{"content":"Once upon"}`, ""), "") + chunk(delta(`{}`, "length"), "") + "data: [DONE]\n\n"
	evs := parseEvents(t, translate(t, testTranslation(t, `{"model":"m","input":"hi","stream":true,"max_output_tokens":2}`), in))
	last := evs[len(evs)-1]
	if last.typ != EventIncomplete {
		t.Fatalf("terminal event %s, want %s", last.typ, EventIncomplete)
	}
	resp := last.data["response"].(map[string]any)
	if resp["status"] != "incomplete" || resp["incomplete_details"].(map[string]any)["reason"] != "max_output_tokens" || resp["max_output_tokens"] != 2.0 {
		t.Errorf("response: %v", resp)
	}
	if item := evs[len(evs)-2].data["item"].(map[string]any); item["status"] != "incomplete" {
		t.Errorf("item done: %v", item)
	}
}

// How a stream ends without [DONE]: finished, it completes; cut off, it
// fails; an error chunk or a chunk that is no JSON fails it; Fail fails
// it with the item being written left incomplete.
func TestStreamEnds(t *testing.T) {
	t.Parallel()
	req := `{"model":"m","input":"hi","stream":true}`
	for _, tc := range []struct {
		name, in string
		fail     func(w *Writer) error
		want     string // the terminal event
		status   string // of the last item, if any
		message  string // in the error
	}{
		{name: "finished", in: chunk(delta(`{"content":"Hi"}`, ""), "") + chunk(delta(`{}`, "stop"), ""), want: EventCompleted, status: "completed"},
		{name: "cut off", in: chunk(delta(`{"content":"Hi"}`, ""), ""), want: EventFailed, status: "incomplete", message: "before the answer was finished"},
		{name: "nothing at all", want: EventFailed, message: "before the answer was finished"},
		{name: "an error chunk", in: chunk(delta(`{"content":"Hi"}`, ""), "") + `data: {"error":{"message":"overloaded","type":"server_error"}}` + "\n\n",
			want: EventFailed, status: "incomplete", message: "overloaded"},
		{name: "no JSON", in: "data: {oops\n\n", want: EventFailed, message: "not JSON"},
		{name: "failed by the gateway", in: chunk(delta(`{"content":"Hi"}`, ""), ""), want: EventFailed, status: "incomplete", message: "idle",
			fail: func(w *Writer) error { return w.Fail("upstream_timeout", "the upstream went idle") }},
		{name: "a last line without its newline", in: chunk(delta(`{"content":"Hi"}`, ""), "") + chunk(delta(`{}`, "stop"), "") + "data: [DONE]",
			want: EventCompleted, status: "completed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			w := &Writer{W: &out, S: testTranslation(t, req).NewStream()}
			if _, err := w.Write([]byte(tc.in)); err != nil {
				t.Fatal(err)
			}
			if tc.fail != nil {
				if err := tc.fail(w); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			// Nothing more comes of a stream that has ended.
			if _, err := w.Write([]byte(chunk(delta(`{"content":"more"}`, ""), ""))); err != nil {
				t.Fatal(err)
			}
			evs := parseEvents(t, out.Bytes())
			last := evs[len(evs)-1]
			if last.typ != tc.want || slices.ContainsFunc(evs[:len(evs)-1], func(e event) bool { return e.typ == tc.want }) {
				t.Fatalf("events %v; want one terminal %s, last", types(evs), tc.want)
			}
			resp := last.data["response"].(map[string]any)
			if out := resp["output"].([]any); tc.status != "" && (len(out) == 0 || out[len(out)-1].(map[string]any)["status"] != tc.status) {
				t.Errorf("output %v; want the last item %s", out, tc.status)
			}
			if tc.message != "" {
				e, _ := resp["error"].(map[string]any)
				if msg, _ := e["message"].(string); !strings.Contains(msg, tc.message) || resp["status"] != "failed" {
					t.Errorf("response %v; want status failed, an error saying %q", resp, tc.message)
				}
			}
		})
	}
}

// A stream split anywhere, even byte by byte, translates as it does
// whole, and each chunk's events come as soon as the chunk is in.
func TestWriterSplits(t *testing.T) {
	t.Parallel()
	in := chunk(delta(`{"role":"assistant","content":"Hé"}`, ""), "") +
		"\r\n: a comment\r\n" +
		chunk(delta(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":"{}"}}]}`, ""), "") +
		chunk(delta(`{}`, "tool_calls"), "") + chunk("", streamUsage) + "data: [DONE]\n\n"
	whole := translate(t, testTranslation(t, `{"model":"m","input":"hi","stream":true}`), in)
	var out bytes.Buffer
	w := &Writer{W: &out, S: testTranslation(t, `{"model":"m","input":"hi","stream":true}`).NewStream()}
	for i := range len(in) {
		if _, err := w.Write([]byte{in[i]}); err != nil {
			t.Fatal(err)
		}
		if in[i] == '\n' && i+1 < len(in) && in[i+1] == '\n' && !bytes.HasPrefix(whole, out.Bytes()) {
			t.Fatalf("after byte %d the events differ from the whole stream's", i)
		}
		if i == len(chunk(delta(`{"role":"assistant","content":"Hé"}`, ""), ""))-1 && !bytes.Contains(out.Bytes(), []byte(`"delta":"Hé"`)) {
			t.Fatalf("the first chunk's delta did not come when the chunk was in:\n%s", out.Bytes())
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), whole) {
		t.Errorf("byte by byte\n%s\nwhole\n%s", out.Bytes(), whole)
	}
}

// A writer that fails is reported.
func TestWriterError(t *testing.T) {
	t.Parallel()
	w := &Writer{W: failingWriter{}, S: testTranslation(t, `{"model":"m","input":"hi","stream":true}`).NewStream()}
	if _, err := w.Write([]byte(chunk(delta(`{"content":"Hi"}`, ""), ""))); err == nil {
		t.Fatal("no error from a writer that failed")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, fmt.Errorf("gone") }

// answer is a random Chat Completions answer: text, tool calls, or both,
// with usage.
type answer struct {
	text   string
	calls  [][3]string // id, name, arguments
	finish string
	prompt int
	output int
}

func randomAnswer(r *rand.Rand) answer {
	words := []string{"a", "Hé", " ", "\"q\"", "\n", "日本", "\\", "{\"k\":1}", "<b>"}
	pick := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(words[r.IntN(len(words))])
		}
		return b.String()
	}
	a := answer{finish: "stop", prompt: r.IntN(1000), output: r.IntN(1000)}
	if r.IntN(3) > 0 {
		a.text = pick(1 + r.IntN(20))
	}
	if r.IntN(2) == 0 || a.text == "" {
		for i := range 1 + r.IntN(3) {
			a.calls = append(a.calls, [3]string{fmt.Sprintf("call_%d_%d", i, r.IntN(1e6)), "fn" + pick(1), pick(r.IntN(10))})
		}
		a.finish = "tool_calls"
	}
	if r.IntN(5) == 0 {
		a.finish = "length"
	}
	return a
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// completion is a as a non-streamed answer.
func (a answer) completion() string {
	msg := `"role":"assistant","content":null`
	if a.text != "" {
		msg = `"role":"assistant","content":` + jsonString(a.text)
	}
	if len(a.calls) > 0 {
		var calls []string
		for _, c := range a.calls {
			calls = append(calls, `{"id":`+jsonString(c[0])+`,"type":"function","function":{"name":`+jsonString(c[1])+`,"arguments":`+jsonString(c[2])+`}}`)
		}
		msg += `,"tool_calls":[` + strings.Join(calls, ",") + `]`
	}
	return fmt.Sprintf(`{"model":"gpt-x","choices":[{"index":0,"message":{%s},"finish_reason":%q}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`,
		msg, a.finish, a.prompt, a.output, a.prompt+a.output)
}

// stream is a as a stream, its text and arguments in random pieces.
func (a answer) stream(r *rand.Rand) string {
	pieces := func(s string) []string {
		var out []string
		for len(s) > 0 {
			n := min(len(s), 1+r.IntN(6))
			for n < len(s) && s[n]&0xC0 == 0x80 {
				n++ // whole characters, as a JSON string holds them
			}
			out = append(out, s[:n])
			s = s[n:]
		}
		return out
	}
	s := chunk(delta(`{"role":"assistant","content":""}`, ""), "")
	for _, p := range pieces(a.text) {
		s += chunk(delta(`{"content":`+jsonString(p)+`}`, ""), "")
	}
	for i, c := range a.calls {
		s += chunk(delta(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":%s,"type":"function","function":{"name":%s,"arguments":""}}]}`, i, jsonString(c[0]), jsonString(c[1])), ""), "")
		for _, p := range pieces(c[2]) {
			s += chunk(delta(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]}`, i, jsonString(p)), ""), "")
		}
	}
	s += chunk(delta(`{}`, a.finish), "")
	s += chunk("", fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, a.prompt, a.output, a.prompt+a.output))
	return s + "data: [DONE]\n\n"
}

// Property: a Chat Completions answer translated keeps its text, its tool
// calls (ids, names, arguments), its finish and its usage, whether it
// came whole or streamed in random pieces written in random splits; the
// streamed deltas add up to the done events' text and arguments, and the
// final response is the one the whole answer makes.
func TestTranslationKeepsTheAnswer(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		a := randomAnswer(r)
		whole, err := testTranslation(t, `{"model":"m","input":"hi"}`).FromChat([]byte(a.completion()))
		if err != nil {
			t.Fatal(err)
		}
		var resp Response
		if err := json.Unmarshal(whole, &resp); err != nil {
			t.Fatal(err)
		}
		checkAnswer(t, i, a, resp)

		in := a.stream(r)
		var out bytes.Buffer
		w := &Writer{W: &out, S: testTranslation(t, `{"model":"m","input":"hi","stream":true}`).NewStream()}
		for len(in) > 0 {
			n := min(len(in), 1+r.IntN(200))
			if _, err := w.Write([]byte(in[:n])); err != nil {
				t.Fatal(err)
			}
			in = in[n:]
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		evs := parseEvents(t, out.Bytes())
		var streamed Response
		b, _ := json.Marshal(evs[len(evs)-1].data["response"])
		if err := json.Unmarshal(b, &streamed); err != nil {
			t.Fatal(err)
		}
		checkAnswer(t, i, a, streamed)
		checkDeltas(t, i, evs)
		// The same response but for the ids of its items, made in
		// another order.
		for j := range streamed.Output {
			streamed.Output[j].ID = ""
		}
		for j := range resp.Output {
			resp.Output[j].ID = ""
		}
		if !reflect.DeepEqual(streamed.Output, resp.Output) || !reflect.DeepEqual(streamed.Usage, resp.Usage) || streamed.Status != resp.Status {
			t.Fatalf("answer %d: streamed %+v\nwhole %+v", i, streamed, resp)
		}
	}
}

func checkAnswer(t *testing.T, i int, a answer, resp Response) {
	t.Helper()
	var text string
	var calls [][3]string
	for _, it := range resp.Output {
		switch it.Type {
		case ItemMessage:
			for _, p := range it.Content {
				text += p.Text
			}
		case ItemFunctionCall:
			calls = append(calls, [3]string{it.CallID, it.Name, it.Arguments})
		}
	}
	if text != a.text || !slices.Equal(calls, a.calls) {
		t.Fatalf("answer %d: text %q calls %q; want %q, %q", i, text, calls, a.text, a.calls)
	}
	u := resp.Usage
	if u == nil || u.InputTokens != int64(a.prompt) || u.OutputTokens != int64(a.output) || u.TotalTokens != int64(a.prompt+a.output) {
		t.Fatalf("answer %d: usage %+v; want %d and %d", i, u, a.prompt, a.output)
	}
	if want := map[string]string{"stop": "completed", "tool_calls": "completed", "length": "incomplete"}[a.finish]; resp.Status != want {
		t.Fatalf("answer %d: status %s; want %s", i, resp.Status, want)
	}
}

// checkDeltas checks that each item's deltas add up to its done events.
func checkDeltas(t *testing.T, i int, evs []event) {
	t.Helper()
	sums := map[string]string{}
	for _, e := range evs {
		id, _ := e.data["item_id"].(string)
		switch e.typ {
		case EventOutputTextDelta, EventArgumentsDelta:
			sums[id] += e.data["delta"].(string)
		case EventOutputTextDone:
			if e.data["text"] != sums[id] {
				t.Fatalf("answer %d: text done %q, deltas %q", i, e.data["text"], sums[id])
			}
		case EventArgumentsDone:
			if e.data["arguments"] != sums[id] {
				t.Fatalf("answer %d: arguments done %q, deltas %q", i, e.data["arguments"], sums[id])
			}
		}
	}
}

// A text event is written as json.Marshal writes it.
func TestTextEventAppendJSONIsMarshal(t *testing.T) {
	t.Parallel()
	delta, text := "a <b> & \"c\"\u2028", "whole"
	var none []any
	for _, ev := range []TextEvent{
		{Type: EventOutputTextDelta, ItemID: "msg_1", OutputIndex: 2, ContentIndex: 1, Delta: &delta, Logprobs: &[]any{}, SequenceNumber: 7},
		{Type: EventRefusalDelta, ItemID: "msg_1", Delta: &delta},
		{Type: "x", Text: &text, Refusal: &delta, Logprobs: &none},
		{Logprobs: &[]any{"p", 1.5}},
		{},
	} {
		want, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if got := ev.appendJSON(nil); string(got) != string(want) {
			t.Errorf("appendJSON:\n%s\nwant\n%s", got, want)
		}
	}
}
