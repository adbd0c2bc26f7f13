package gemini

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/weir-gateway/weir/internal/jsontest"
	"github.com/weir-gateway/weir/openaiwire"
)

// A property of the translations: an answer translated to Chat
// Completions, streamed or not, and sent back as history keeps its text,
// its function calls (ids, names, arguments, signatures) and its usage.

// randomAnswer is an answer of random text, thinking and function calls.
func randomAnswer(r *rand.Rand) Response {
	var parts []Part
	for range r.IntN(6) + 1 {
		switch r.IntN(4) {
		case 0:
			parts = append(parts, Part{Text: "thought " + word(r), Thought: true})
		case 1:
			fc := &FunctionCall{Name: "fn_" + word(r), Args: json.RawMessage(fmt.Sprintf(`{"n":%d,"s":%q}`, r.IntN(100), word(r)))}
			if r.IntN(2) == 0 {
				fc.ID = "id-" + word(r)
			}
			p := Part{FunctionCall: fc}
			if r.IntN(2) == 0 {
				p.ThoughtSignature = "sig-" + word(r)
			}
			parts = append(parts, p)
		default:
			parts = append(parts, Part{Text: word(r) + " " + word(r) + "\n\"é\" "})
		}
	}
	prompt, out, thoughts := r.Int64N(1000), r.Int64N(500), r.Int64N(50)
	return Response{
		Candidates:    []Candidate{{Content: &Content{Role: RoleModel, Parts: parts}, FinishReason: FinishStop}},
		UsageMetadata: &UsageMetadata{PromptTokenCount: prompt, CandidatesTokenCount: out, ThoughtsTokenCount: thoughts, TotalTokenCount: prompt + out + thoughts, CachedContentTokenCount: prompt / 2},
		ResponseID:    "resp" + word(r),
	}
}

func word(r *rand.Rand) string {
	const letters = "abcdefghijklmnopqrstuvwxyz"
	var sb strings.Builder
	for range r.IntN(8) + 1 {
		sb.WriteByte(letters[r.IntN(len(letters))])
	}
	return sb.String()
}

// wantText is the answer's text: its parts that are not thinking.
func wantText(resp Response) string {
	var sb strings.Builder
	for _, p := range resp.Candidates[0].Content.Parts {
		if p.FunctionCall == nil && !p.Thought {
			sb.WriteString(p.Text)
		}
	}
	return sb.String()
}

func wantCalls(resp Response) []*FunctionCall {
	var out []*FunctionCall
	for _, p := range resp.Candidates[0].Content.Parts {
		if p.FunctionCall != nil {
			out = append(out, p.FunctionCall)
		}
	}
	return out
}

func TestRoundTripKeepsTextCallsIDsAndUsage(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		resp := randomAnswer(r)
		body, _ := json.Marshal(resp)
		got, err := ToChat(body, AnswerMeta{Model: "m", Created: 1})
		if err != nil {
			t.Fatal(err)
		}
		var cc openaiwire.ChatCompletion
		if err := json.Unmarshal(got, &cc); err != nil {
			t.Fatal(err)
		}
		msg := cc.Choices[0].Message
		checkAnswer(t, i, resp, msg.Content.Text(), msg.ToolCalls, cc.Usage)

		// Streamed, in events of random size, it says the same.
		content, calls, usage := streamed(t, r, resp)
		checkAnswer(t, i, resp, content, calls, usage)
		for j := range calls {
			if calls[j].ID != msg.ToolCalls[j].ID {
				t.Fatalf("case %d: call %d is %q streamed, %q not", i, j, calls[j].ID, msg.ToolCalls[j].ID)
			}
		}

		// Sent back as history with each call's result, the calls are
		// Gemini's again, and each result names its call's function.
		checkHistory(t, i, resp, msg)
	}
}

func checkAnswer(t *testing.T, i int, resp Response, text string, calls []openaiwire.ToolCall, usage *openaiwire.Usage) {
	t.Helper()
	if want := wantText(resp); text != want {
		t.Fatalf("case %d: text %q; want %q", i, text, want)
	}
	want := wantCalls(resp)
	if len(calls) != len(want) {
		t.Fatalf("case %d: %d tool calls; want %d", i, len(calls), len(want))
	}
	seen := map[string]bool{}
	for j, fc := range want {
		c := calls[j]
		if fc.ID != "" && c.ID != fc.ID || c.ID == "" || seen[c.ID] {
			t.Fatalf("case %d: call %d id %q (Gemini's %q); want Gemini's, or a new one", i, j, c.ID, fc.ID)
		}
		seen[c.ID] = true
		if c.Function.Name != fc.Name || !jsontest.Same([]byte(c.Function.Arguments), fc.Args) {
			t.Fatalf("case %d: call %d is %s(%s); want %s(%s)", i, j, c.Function.Name, c.Function.Arguments, fc.Name, fc.Args)
		}
	}
	u := resp.UsageMetadata
	if usage == nil || usage.PromptTokens != u.PromptTokenCount || usage.CompletionTokens != u.CandidatesTokenCount+u.ThoughtsTokenCount ||
		usage.TotalTokens != u.TotalTokenCount || usage.PromptTokensDetails.CachedTokens != u.CachedContentTokenCount ||
		usage.CompletionTokensDetails.ReasoningTokens != u.ThoughtsTokenCount {
		t.Fatalf("case %d: usage %+v; want that of %+v", i, usage, u)
	}
}

// streamed sends resp's parts in events of random size and puts the
// chunks back together.
func streamed(t *testing.T, r *rand.Rand, resp Response) (string, []openaiwire.ToolCall, *openaiwire.Usage) {
	t.Helper()
	s := NewStream(AnswerMeta{Model: "m", Created: 1}, r.IntN(2) == 0)
	parts := resp.Candidates[0].Content.Parts
	var sse []byte
	for len(parts) > 0 {
		n := r.IntN(len(parts)) + 1
		ev := Response{Candidates: []Candidate{{Content: &Content{Role: RoleModel, Parts: parts[:n]}}}, ResponseID: resp.ResponseID}
		parts = parts[n:]
		if len(parts) == 0 {
			ev.Candidates[0].FinishReason = FinishStop
			ev.UsageMetadata = resp.UsageMetadata
		}
		data, _ := json.Marshal(ev)
		var err error
		if sse, err = s.Event(sse, data); err != nil {
			t.Fatal(err)
		}
	}
	sse, err := s.End(sse)
	if err != nil {
		t.Fatal(err)
	}
	var content string
	var calls []openaiwire.ToolCall
	var usage *openaiwire.Usage
	for _, ev := range strings.Split(strings.TrimSpace(string(sse)), "\n\n") {
		data := strings.TrimPrefix(ev, "data: ")
		if data == "[DONE]" {
			break
		}
		var c openaiwire.ChatChunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		if c.Usage != nil {
			usage = c.Usage
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				content += *ch.Delta.Content
			}
			for _, tc := range ch.Delta.ToolCalls {
				if *tc.Index != len(calls) {
					t.Fatalf("tool call index %d; want %d", *tc.Index, len(calls))
				}
				tc.Index = nil
				calls = append(calls, tc)
			}
		}
	}
	return content, calls, usage
}

func checkHistory(t *testing.T, i int, resp Response, msg openaiwire.AnswerMessage) {
	t.Helper()
	hist := []map[string]any{{"role": "user", "content": "go"}, {"role": "assistant", "content": msg.Content, "tool_calls": msg.ToolCalls}}
	for _, c := range msg.ToolCalls {
		hist = append(hist, map[string]any{"role": "tool", "tool_call_id": c.ID, "content": "ok"})
	}
	if len(msg.ToolCalls) == 0 {
		hist[1]["tool_calls"] = nil
	}
	body, _ := json.Marshal(map[string]any{"model": "m", "messages": hist})
	tr, err := FromChat(body)
	if err != nil {
		t.Fatalf("case %d: %v", i, err)
	}
	want := wantCalls(resp)
	var model, results []Part
	for _, c := range tr.Request.Contents[1:] {
		for _, p := range c.Parts {
			switch {
			case p.FunctionCall != nil:
				model = append(model, p)
			case p.FunctionResponse != nil:
				results = append(results, p)
			}
		}
	}
	if len(model) != len(want) || len(results) != len(want) {
		t.Fatalf("case %d: %d calls and %d results back; want %d", i, len(model), len(results), len(want))
	}
	k := 0 // the call's place among the calls
	for _, p := range resp.Candidates[0].Content.Parts {
		if p.FunctionCall == nil {
			continue
		}
		got := model[k]
		if got.FunctionCall.Name != p.FunctionCall.Name || !jsontest.Same(got.FunctionCall.Args, p.FunctionCall.Args) ||
			got.FunctionCall.ID != msg.ToolCalls[k].ID {
			t.Fatalf("case %d: call %d back as %+v; want %+v", i, k, got.FunctionCall, p.FunctionCall)
		}
		wantSig := p.ThoughtSignature
		if wantSig == "" && k == 0 {
			wantSig = SkipSignature
		}
		if got.ThoughtSignature != wantSig {
			t.Fatalf("case %d: call %d signature %q; want %q", i, k, got.ThoughtSignature, wantSig)
		}
		if res := results[k].FunctionResponse; res.Name != p.FunctionCall.Name || res.ID != got.FunctionCall.ID {
			t.Fatalf("case %d: result %d names %s (%s); want %s (%s)", i, k, res.Name, res.ID, p.FunctionCall.Name, got.FunctionCall.ID)
		}
		k++
	}
}
