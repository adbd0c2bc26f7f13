package tokens

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/weir-gateway/weir"
)

// CountJSON is the number of tokens of a JSON request body in t's
// encoding: the text of each string value (unescaped) counted in the
// encoding, and the rest of the body — keys, punctuation, numbers, names
// (a model's, a role, a type: names) and base64 data (a data: URL, an
// inline image or audio) — at four bytes a token, as the estimate counts
// them. A body over ExactBytes has about
// ExactBytes of its text counted in the encoding, in pieces spread
// evenly through it, and the rest estimated at the rate the encoding
// counted the pieces (the count over their estimate), so that no body
// costs much more to count than ExactBytes. It reads any input, valid
// JSON or not, without panicking.
func CountJSON(t weir.Tokenizer, body []byte) int64 {
	c := textCount{t: t, size: int64(len(body))}
	var rest int
	var buf, key []byte
	for i := 0; i < len(body); {
		// What lies between strings is the body's structure, counted by
		// its length.
		q := bytes.IndexByte(body[i:], '"')
		if q < 0 {
			rest += len(body) - i
			break
		}
		rest += q
		i += q
		end, escaped := stringEnd(body, i+1)
		s, next := body[i+1:end], min(end+1, len(body))
		isKey := isKey(body[next:])
		if isKey || isBlob(s) || key != nil && isName(key) {
			rest += next - i
		} else {
			if escaped {
				buf = unescape(buf[:0], s)
				s = buf
			}
			c.add(s)
			rest += 2
		}
		key = nil
		if isKey {
			key = s
		}
		i = next
	}
	return c.tokens() + int64(rest+3)/4
}

// isName reports whether key is one whose string values name something
// (a model, a role, a part's type, an id) rather than say it: CountJSON
// counts them as the body's structure, and spends no encoding on them.
func isName(key []byte) bool {
	switch string(key) {
	case "model", "role", "type", "id", "tool_call_id", "detail":
		return true
	}
	return false
}

// ExactBytes is about how much of a body's text CountJSON counts in its
// encoding: some 16,000 tokens of English, 20,000 to 30,000 of Chinese.
const ExactBytes = 64 << 10

// piece is the size of the pieces a long body's text is sampled in.
const piece = 4 << 10

// textCount counts the texts of a body of size bytes in an encoding: all
// of them if the body is at most ExactBytes, else pieces of them,
// ExactBytes of every size, the others estimated.
type textCount struct {
	t    weir.Tokenizer
	size int64
	// credit is how much of the next piece may be counted, times size.
	credit int64
	// exact is the count of the pieces counted, sampled their estimate,
	// rest the estimate of the others.
	exact              int64
	sampled, estimated Estimator
}

func (c *textCount) add(text []byte) {
	switch {
	case codecs[c.t] == nil:
		c.estimated.AddBytes(text)
		return
	case c.size <= ExactBytes:
		c.exact += Count(c.t, string(text))
		return
	}
	for len(text) > 0 {
		n := pieceEnd(text)
		p := text[:n]
		text = text[n:]
		c.credit += int64(n) * ExactBytes
		if c.credit < int64(n)*c.size {
			c.estimated.AddBytes(p)
			continue
		}
		c.credit -= int64(n) * c.size
		c.exact += Count(c.t, string(p))
		c.sampled.AddBytes(p)
	}
}

// pieceEnd is where the first piece of text ends: at most piece bytes,
// after a space or a line's end if one is near the cut, else at a
// character's start.
func pieceEnd(text []byte) int {
	if len(text) <= piece {
		return len(text)
	}
	if i := bytes.LastIndexAny(text[piece-64:piece], " \n"); i >= 0 {
		return piece - 64 + i + 1
	}
	cut := piece
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return max(cut, 1)
}

// tokens is the count of the texts added: the pieces counted, and the
// estimate of the others times the pieces' count over their estimate
// (the estimate alone for an encoding this package does not carry),
// rounded up.
func (c *textCount) tokens() int64 {
	estimated, sampled := c.estimated.Tokens(), c.sampled.Tokens()
	if estimated == 0 || sampled == 0 {
		return c.exact + estimated
	}
	return c.exact + (estimated*c.exact+sampled-1)/sampled
}

// stringEnd is the index of the quote that closes the JSON string whose
// text starts at b[from:] (len(b) if none does), and whether the text
// has escapes.
func stringEnd(b []byte, from int) (end int, escaped bool) {
	for i := from; i < len(b); {
		quote := len(b)
		if q := bytes.IndexByte(b[i:], '"'); q >= 0 {
			quote = i + q
		}
		// A backslash escapes the byte after it: the quote is the end
		// unless a backslash before it escapes it.
		for {
			e := bytes.IndexByte(b[i:quote], '\\')
			if e < 0 {
				return quote, escaped
			}
			escaped = true
			i += e + 2
			if i > quote {
				break
			}
		}
	}
	return len(b), escaped
}

// isKey reports whether what follows a string is ':', making it an
// object's key.
func isKey(after []byte) bool {
	for _, c := range after {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c == ':'
	}
	return false
}

// blobPrefix is how many bytes isBlob reads of a long string.
const blobPrefix = 256

// isBlob reports whether a string's text is data rather than words: a
// data: URL, or a long run of base64 (an image's or audio's bytes),
// which no encoding counts as text and an upstream counts its own way.
func isBlob(s []byte) bool {
	if bytes.HasPrefix(s, []byte("data:")) {
		return true
	}
	if len(s) < blobPrefix {
		return false
	}
	for _, c := range s[:blobPrefix] {
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '=') {
			return false
		}
	}
	return true
}

// unescape appends the text of a JSON string's escaped contents s to
// dst. A malformed escape is kept as it stands.
func unescape(dst, s []byte) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			dst = append(dst, c)
			continue
		}
		i++
		switch s[i] {
		case 'n':
			dst = append(dst, '\n')
		case 't':
			dst = append(dst, '\t')
		case 'r':
			dst = append(dst, '\r')
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'u':
			r, n := hexRune(s[i+1:])
			if n == 0 {
				dst = append(dst, '\\', 'u')
				continue
			}
			i += n
			if utf16.IsSurrogate(r) {
				if len(s) >= i+7 && s[i+1] == '\\' && s[i+2] == 'u' {
					if r2, m := hexRune(s[i+3:]); m == 4 {
						if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
							r = pair
							i += 6
						}
					}
				}
			}
			dst = utf8.AppendRune(dst, r)
		default: // '"', '\\', '/', or not an escape: the character
			dst = append(dst, s[i])
		}
	}
	return dst
}

// hexRune reads the four hex digits of a \u escape at the start of b:
// the rune and 4, or 0, 0 if they are not there.
func hexRune(b []byte) (rune, int) {
	if len(b) < 4 {
		return 0, 0
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, 0
		}
		r = r<<4 | rune(c)
	}
	return r, 4
}
