package mock

import "strings"

// A text answer is words, one token each, that always end a sentence: an
// answer of n tokens is as many of the sentences below, taken in turn, as
// fit in n, then the closer of exactly the tokens left. Only a cut
// (max_tokens below the answer's length, finish_reason "length") ends
// mid-sentence, as a real model's does. No word needs JSON escaping.
var sentences = [][]string{
	strings.Fields("This is a mock answer."),
	strings.Fields("Weir's mock provider wrote it."),
	strings.Fields("It comes one token at a time."),
	strings.Fields("Gateways, demos and benchmarks see a steady pace."),
	strings.Fields("It knows nothing and says so plainly."),
	strings.Fields("Ask again and it says the same."),
}

// closers[r] is a sentence of r tokens, for every r shorter than the
// longest sentence: whatever is left after the whole sentences that fit.
var closers = [][]string{
	nil,
	strings.Fields("Done."),
	strings.Fields("That's all."),
	strings.Fields("That is all."),
	strings.Fields("And that is all."),
	strings.Fields("That is all it says."),
	strings.Fields("That is the whole mock answer."),
	strings.Fields("And that is the whole mock answer."),
}

// cycleWords is the sentences' words in turn and cycleEnds where each
// sentence ends in it (exclusive, increasing): token i of the sentences,
// cycling, is cycleWords[i%len(cycleWords)].
var cycleWords, cycleEnds = func() ([]string, []int) {
	var words []string
	var ends []int
	for _, s := range sentences {
		if len(s) > len(closers) {
			panic("mock: a sentence longer than the closers cover")
		}
		words = append(words, s...)
		ends = append(ends, len(words))
	}
	return words, ends
}()

// cycleToken is token i of the sentences taken in turn, with a leading
// space after the first, as real tokenizers split text.
func cycleToken(i int) string {
	w := cycleWords[i%len(cycleWords)]
	if i == 0 {
		return w
	}
	return " " + w
}

// textAnswer is the text of an answer of total tokens: tokens [0, body)
// from the sentences in turn, [body, total) the closer of total-body.
type textAnswer struct {
	total, body int
}

func newTextAnswer(total int) textAnswer {
	n := len(cycleWords)
	body := total / n * n
	rest := total % n
	for _, e := range cycleEnds {
		if e <= rest {
			body = total/n*n + e
		}
	}
	return textAnswer{total: total, body: body}
}

// append appends tokens [from, to) of the answer.
func (t textAnswer) append(b []byte, from, to int) []byte {
	if from < t.body {
		b = appendCycle(b, from, min(to, t.body))
	}
	closer := closers[t.total-t.body]
	for i := max(from, t.body); i < to; i++ {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, closer[i-t.body]...)
	}
	return b
}

// String is the whole answer.
func (t textAnswer) String() string { return string(t.append(nil, 0, t.total)) }

// preText holds the first preTokens tokens of the sentences in turn and
// preEnds where each ends, so most of an answer is one slice, built once.
const preTokens = 1024

var preText, preEnds = func() (string, []int) {
	var sb strings.Builder
	ends := make([]int, preTokens)
	for i := range preTokens {
		sb.WriteString(cycleToken(i))
		ends[i] = sb.Len()
	}
	return sb.String(), ends
}()

// appendCycle appends tokens [from, to) of the sentences in turn.
func appendCycle(b []byte, from, to int) []byte {
	if to <= from {
		return b
	}
	if to <= preTokens {
		start := 0
		if from > 0 {
			start = preEnds[from-1]
		}
		return append(b, preText[start:preEnds[to-1]]...)
	}
	for i := from; i < to; i++ {
		b = append(b, cycleToken(i)...)
	}
	return b
}

// textLen is about the length of n tokens, for sizing buffers.
func textLen(n int) int {
	if n == 0 {
		return 0
	}
	if n <= preTokens {
		return preEnds[n-1]
	}
	return preEnds[preTokens-1] / preTokens * n
}
