package anthropic

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/weir-gateway/weir/openaiwire"
)

// A property: a Chat Completions conversation translated to Messages and
// back keeps its text, its tool calls (ids, names, arguments) and its
// tool results; a Messages answer translated to Chat Completions and back
// keeps its text, its tool calls and its usage.

// randomConversation is a chat conversation of user turns, assistant
// turns with text and tool calls, and the tool results answering them.
func randomConversation(r *rand.Rand) []openaiwire.Message {
	word := func() string { return fmt.Sprintf("w%d \"q\" ü\n", r.IntN(1000)) }
	msgs := []openaiwire.Message{{Role: "user", Content: openaiwire.TextContent(word())}}
	for range r.IntN(5) {
		a := openaiwire.Message{Role: "assistant"}
		if r.IntN(2) == 0 {
			a.Content = openaiwire.TextContent(word())
		}
		calls := r.IntN(3)
		if calls == 0 && a.Content.IsNull() {
			calls = 1
		}
		for k := range calls {
			args := fmt.Sprintf(`{"n":%d,"s":%q}`, r.IntN(100), word())
			a.ToolCalls = append(a.ToolCalls, openaiwire.ToolCall{ID: fmt.Sprintf("call_%d_%d", len(msgs), k), Type: "function",
				Function: openaiwire.FunctionCall{Name: fmt.Sprintf("f%d", r.IntN(3)), Arguments: args}})
		}
		msgs = append(msgs, a)
		for _, c := range a.ToolCalls {
			msgs = append(msgs, openaiwire.Message{Role: "tool", ToolCallID: c.ID, Content: openaiwire.TextContent(word())})
		}
		msgs = append(msgs, openaiwire.Message{Role: "user", Content: openaiwire.TextContent(word())})
	}
	return msgs
}

// said is what a conversation says, in order: texts, calls, results.
func said(t *testing.T, msgs []openaiwire.Message) []string {
	t.Helper()
	var out []string
	for _, m := range msgs {
		if text := m.Content.Text(); text != "" {
			out = append(out, m.Role+": "+text)
		}
		for _, c := range m.ToolCalls {
			var args any
			if err := json.Unmarshal([]byte(c.Function.Arguments), &args); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("call %s %s %v", c.ID, c.Function.Name, args))
		}
		if m.ToolCallID != "" {
			out = append(out, "result "+m.ToolCallID)
		}
	}
	return out
}

func TestRoundTripRequest(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		msgs := randomConversation(r)
		body := mustJSON(t, openaiwire.ChatRequest{Model: "m", Messages: msgs})
		mreq, err := RequestFromChat(body, DefaultMaxTokens)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		parsed, err := ParseRequest(mustJSON(t, mreq))
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		for k := 1; k < len(parsed.Messages); k++ {
			if parsed.Messages[k].Role == parsed.Messages[k-1].Role {
				t.Fatalf("case %d: turns %d and %d are both %s's", i, k-1, k, parsed.Messages[k].Role)
			}
		}
		back, err := RequestToChat(parsed)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		var got openaiwire.ChatRequest
		if err := json.Unmarshal(back, &got); err != nil {
			t.Fatal(err)
		}
		if w, g := said(t, msgs), said(t, got.Messages); !reflect.DeepEqual(w, g) {
			t.Fatalf("case %d: the round trip changed the conversation\nwant %q\ngot  %q", i, w, g)
		}
	}
}

func TestRoundTripAnswer(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 300 {
		a := Answer{ID: fmt.Sprintf("msg_%d", i), Type: "message", Role: "assistant", Model: "c", Content: []Block{}}
		if r.IntN(3) > 0 {
			a.Content = append(a.Content, Block{Type: BlockText, Text: fmt.Sprintf("text %d \"ü\"", r.IntN(1000))})
		}
		for k := range r.IntN(3) {
			a.Content = append(a.Content, Block{Type: BlockToolUse, ID: fmt.Sprintf("toolu_%d", k), Name: "f",
				Input: json.RawMessage(fmt.Sprintf(`{"k":%d}`, r.IntN(50)))})
		}
		stop := []string{StopEndTurn, StopMaxTokens, StopToolUse}[r.IntN(3)]
		a.StopReason = &stop
		a.Usage = Usage{InputTokens: r.Int64N(1000), OutputTokens: r.Int64N(1000), CacheReadInputTokens: r.Int64N(1000)}
		chat, err := AnswerToChat(mustJSON(t, a), 0)
		if err != nil {
			t.Fatal(err)
		}
		back, err := AnswerFromChat(chat)
		if err != nil {
			t.Fatal(err)
		}
		var got Answer
		if err := json.Unmarshal(back, &got); err != nil {
			t.Fatal(err)
		}
		if got.ID != a.ID || *got.StopReason != stop || got.Usage != a.Usage {
			t.Fatalf("case %d: got id %s, stop %s, usage %+v; want %s, %s, %+v", i, got.ID, *got.StopReason, got.Usage, a.ID, stop, a.Usage)
		}
		if w, g := mustJSON(t, a.Content), mustJSON(t, got.Content); string(w) != string(g) {
			t.Fatalf("case %d: content\nwant %s\ngot  %s", i, w, g)
		}
	}
}
