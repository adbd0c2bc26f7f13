package responses

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// parseSeeds are requests for the fuzz tests to start from.
var parseSeeds = []string{
	`{"model":"m","input":"hi"}`,
	`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"x"},{"type":"input_image","image_url":"u"}]}]}`,
	`{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"o"}]}`,
	`{"model":"m","input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"f"},"text":{"format":{"type":"json_schema","name":"n","schema":{}}}}`,
	`{"model":"m","input":"x","store":true}`,
	`{"model":"m","input":[{"type":"message","role":"assistant","content":null}]}`,
	`null`, `[]`, `{"input":{}}`,
	`{"model":"m","input":"x","Model":"n"}`, `{"model":"m","model":"n","input":"x"}`, `{"mod\u0065l":"m","input":"x"}`,
	`{"model":"m","input":"x","temperature":0.5,"top_p":1e400,"stream":true,"store":false,"include":["a"],"metadata":{"k":"v"}}`,
	`{"model":"m","input":null,"instructions":null,"max_output_tokens":3.5,"reasoning":{"effort":"low"},"truncation":"disabled"}`,
	`{"model":"m","input":"x","tools":[null,{"type":"function","name":"f","strict":null,"x":[]}]}`,
	`{"model":"m","input":[null,{"role":"user","content":[null,{"type":"input_text","text":null,"TEXT":"a"}]},{"type":"function_call_output","call_id":"c","output":[]}]}`,
	benchRequest, benchConversation,
}

// FuzzDecodeFast: Parse, reading most requests without reflection, gives
// what parseSlow, with encoding/json alone, gives: the same request or
// the same error.
func FuzzDecodeFast(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, gerr := Parse(body)
		want, werr := parseSlow(body)
		if !reflect.DeepEqual(gerr, werr) || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: Parse %+v, %v; parseSlow %+v, %v", body, got, gerr, want, werr)
		}
	})
}

// FuzzParse: whatever the body, Parse refuses it with an *Error or
// accepts it, and what it accepts translates to a Chat Completions body
// of JSON with the model and at least one message or none at all.
func FuzzParse(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := Parse(body)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("Parse(%q): %T %v, not an *Error", body, err, err)
			}
			return
		}
		chat, err := r.ChatBody()
		if err != nil {
			t.Fatalf("ChatBody of an accepted %q: %v", body, err)
		}
		var c struct {
			Model string `json:"model"`
		}
		if json.Unmarshal(chat, &c) != nil || c.Model != r.Model {
			t.Fatalf("ChatBody of %q: %s", body, chat)
		}
	})
}

// FuzzStream: whatever the upstream's stream, the events are well
// framed, numbered in order, and end in exactly one terminal event.
func FuzzStream(f *testing.F) {
	f.Add([]byte(chunk(delta(`{"content":"Hi"}`, ""), "") + chunk(delta(`{}`, "stop"), "") + "data: [DONE]\n\n"))
	f.Add([]byte(chunk(delta(`{"tool_calls":[{"index":3,"id":"c","function":{"name":"f","arguments":"{"}}]}`, ""), "") + chunk(delta(`{"refusal":"no"}`, "length"), "")))
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\"x\"}}]}}]}\n\ndata: {}\n"))
	f.Add([]byte("data: [DONE]\n\ndata: x\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := Parse([]byte(`{"model":"m","input":"hi","stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		w := &Writer{W: &out, S: NewTranslation(r, testNow).NewStream()}
		if _, err := w.Write(in); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		evs := parseEvents(t, out.Bytes())
		terminal := 0
		for _, e := range evs {
			switch e.typ {
			case EventCompleted, EventIncomplete, EventFailed:
				terminal++
			}
		}
		if terminal != 1 || len(evs) < 3 || evs[0].typ != EventCreated {
			t.Fatalf("events %v for %q", types(evs), in)
		}
	})
}
