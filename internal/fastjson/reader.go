// Package fastjson reads and writes the few fixed JSON shapes the
// dialect translations handle on every request, without encoding/json's
// reflection: a Reader that walks a body strictly, for a decoder of one
// known type to fall back on encoding/json whenever it meets anything
// out of the ordinary, and Append functions that write values byte for
// byte as encoding/json writes them.
//
// A decoder built on Reader is exact by construction only where it gives
// up: it must Fail (and its caller decode the body again with
// encoding/json, for encoding/json's result or error) on every input it
// does not read exactly as encoding/json would — a key that matches a
// field only case-insensitively, a key given twice, a value of an
// unexpected type, anything malformed.
package fastjson

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// maxDepth bounds how deep Skip goes; deeper input is left to
// encoding/json, which has its own limit.
const maxDepth = 1000

// Reader reads one JSON text. Its methods read the next value or token
// and return zero values once it has failed; Failed reports whether it
// did.
type Reader struct {
	b      []byte
	i      int
	failed bool
	// fresh: the last token read opened an object or array, so the next
	// element needs no comma.
	fresh bool
}

// NewReader reads b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Failed reports whether the reader met input it does not read.
func (r *Reader) Failed() bool { return r.failed }

// Fail marks the reader failed: its caller found what it does not read.
func (r *Reader) Fail() { r.failed = true }

// End reports whether the text was read whole, with nothing but spaces
// after it, and nothing failed.
func (r *Reader) End() bool {
	r.space()
	return !r.failed && r.i == len(r.b)
}

func (r *Reader) space() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// peek is the next byte after spaces, 0 at the end.
func (r *Reader) peek() byte {
	r.space()
	if r.failed || r.i >= len(r.b) {
		return 0
	}
	return r.b[r.i]
}

// Peek is the first byte of the next value, 0 at the end or once the
// reader failed.
func (r *Reader) Peek() byte { return r.peek() }

// Open reads the start of an object ('{') or array ('[').
func (r *Reader) Open(c byte) bool {
	if r.peek() != c {
		r.failed = true
		return false
	}
	r.i++
	r.fresh = true
	return true
}

// Next reports whether the object or array that close ends has another
// element, reading the comma before it, or else reads close.
func (r *Reader) Next(close byte) bool {
	c := r.peek()
	fresh := r.fresh
	r.fresh = false
	switch {
	case r.failed:
		return false
	case c == close:
		r.i++
		return false
	case fresh:
		return true
	case c == ',':
		r.i++
		return true
	}
	r.failed = true
	return false
}

// Key reads an object's key and the colon after it. A key with escapes
// fails: encoding/json would unescape it first.
func (r *Reader) Key() []byte {
	lit := r.stringLiteral()
	if r.failed || bytes.IndexByte(lit, '\\') >= 0 {
		r.failed = true
		return nil
	}
	if r.peek() != ':' {
		r.failed = true
		return nil
	}
	r.i++
	return lit[1 : len(lit)-1]
}

// anyKey reads a key, escapes and all, and the colon after it.
func (r *Reader) anyKey() {
	r.stringLiteral()
	if r.peek() != ':' {
		r.failed = true
		return
	}
	r.i++
}

// Once fails the reader if bit is already in seen (a key given twice,
// which encoding/json would merge), and adds it.
func (r *Reader) Once(seen *uint64, bit uint) {
	if *seen&(1<<bit) != 0 {
		r.failed = true
	}
	*seen |= 1 << bit
}

// SkipUnknown skips the value of key, a key the decoder has no field
// for; it fails if key matches one of names case-insensitively, as
// encoding/json would match it to that field.
func (r *Reader) SkipUnknown(key []byte, names []string) {
	for _, c := range key {
		if c >= utf8.RuneSelf {
			r.failed = true // matched by Unicode's case folding, maybe
			return
		}
	}
	for _, n := range names {
		if len(n) == len(key) && bytes.EqualFold(key, []byte(n)) {
			r.failed = true
			return
		}
	}
	r.Skip()
}

// Null reads null if it is next, reporting whether it was.
func (r *Reader) Null() bool {
	if r.peek() == 'n' && bytes.HasPrefix(r.b[r.i:], []byte("null")) {
		r.i += 4
		return true
	}
	return false
}

// String reads a string; null is "", as encoding/json leaves a string
// it decodes null into.
func (r *Reader) String() string {
	if r.Null() {
		return ""
	}
	lit := r.stringLiteral()
	if r.failed {
		return ""
	}
	return unquote(lit)
}

// StringPtr reads a string or null (nil).
func (r *Reader) StringPtr() *string {
	if r.Null() {
		return nil
	}
	s := r.String()
	return &s
}

// Int64 reads an integer; null is 0. A number that is not an int64 (a
// fraction, an exponent, out of range) fails.
func (r *Reader) Int64() int64 {
	if r.Null() {
		return 0
	}
	r.space()
	num := r.number()
	if r.failed {
		return 0
	}
	n, err := strconv.ParseInt(string(num), 10, 64)
	if err != nil {
		r.failed = true
		return 0
	}
	return n
}

// Raw reads any value and returns a copy of it as it is, as a
// json.RawMessage field keeps it (null included).
func (r *Reader) Raw() []byte {
	span := r.Span()
	if span == nil {
		return nil
	}
	return append([]byte(nil), span...)
}

// Span reads any value and returns it as it is in the text read, not
// copied.
func (r *Reader) Span() []byte {
	r.space()
	start := r.i
	r.Skip()
	if r.failed {
		return nil
	}
	return r.b[start:r.i]
}

// Offset is where the next value starts, after any spaces.
func (r *Reader) Offset() int {
	r.space()
	return r.i
}

// Since is the text read from offset to here.
func (r *Reader) Since(offset int) []byte { return r.b[offset:r.i] }

// Bool reads true or false; null is false, as encoding/json leaves a
// bool it decodes null into.
func (r *Reader) Bool() bool {
	switch r.peek() {
	case 't':
		r.literal("true")
		return true
	case 'f':
		r.literal("false")
		return false
	}
	if !r.Null() {
		r.failed = true
	}
	return false
}

// BoolPtr reads true, false or null (nil).
func (r *Reader) BoolPtr() *bool {
	if r.Null() {
		return nil
	}
	v := r.Bool()
	return &v
}

// Int64Ptr reads an integer or null (nil).
func (r *Reader) Int64Ptr() *int64 {
	if r.Null() {
		return nil
	}
	n := r.Int64()
	return &n
}

// Float64 reads a number; null is 0, as encoding/json leaves a float it
// decodes null into. A number out of float64's range fails.
func (r *Reader) Float64() float64 {
	if r.Null() {
		return 0
	}
	r.space()
	num := r.number()
	if r.failed {
		return 0
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil {
		r.failed = true
		return 0
	}
	return f
}

// Float64Ptr reads a number or null (nil); a number out of float64's
// range fails.
func (r *Reader) Float64Ptr() *float64 {
	if r.Null() {
		return nil
	}
	f := r.Float64()
	if r.failed {
		return nil
	}
	return &f
}

// Skip reads any value, checking it is well formed.
func (r *Reader) Skip() { r.skip(0) }

func (r *Reader) skip(depth int) {
	switch c := r.peek(); c {
	case '{', '[':
		if depth >= maxDepth {
			r.failed = true
			return
		}
		close := byte('}')
		if c == '[' {
			close = ']'
		}
		r.Open(c)
		for r.Next(close) {
			if c == '{' {
				r.anyKey()
			}
			r.skip(depth + 1)
		}
	case '"':
		r.stringLiteral()
	case 't':
		r.literal("true")
	case 'f':
		r.literal("false")
	case 'n':
		r.literal("null")
	default:
		r.number()
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// stringEnd is the index after the closing quote of the string literal
// starting at b[i], or -1 if it is not a well-formed one.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		if j = plainEnd(b, j); j == len(b) {
			break
		}
		switch c := b[j]; {
		case c == '"':
			return j + 1
		case c < 0x20:
			return -1
		case c == '\\':
			j++
			if j >= len(b) {
				return -1
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(b) {
					return -1
				}
				for _, h := range b[j+1 : j+5] {
					if !isHex(h) {
						return -1
					}
				}
				j += 4
			default:
				return -1
			}
		}
	}
	return -1
}

// plainEnd is the index of the first byte from b[j] on that ends a run
// of a string's plain bytes (a quote, a backslash or a control
// character), len(b) if none does. It looks at eight bytes at a time:
// most of a string's bytes are plain.
func plainEnd(b []byte, j int) int {
	for ; j+8 <= len(b); j += 8 {
		if m := unplain(binary.LittleEndian.Uint64(b[j:])); m != 0 {
			return j + bits.TrailingZeros64(m)/8
		}
	}
	for ; j < len(b); j++ {
		if c := b[j]; c == '"' || c == '\\' || c < 0x20 {
			break
		}
	}
	return j
}

// unplain has the high bit set of each of w's bytes (little-endian)
// that is a quote, a backslash or below 0x20. A byte of (x-0x01..)&^x
// has it set if x's byte is 0 (a quote or a backslash, xor'ed away), of
// (x-0x20..)&^x if it is below 0x20; a subtraction's borrow can also set
// it in bytes above such a byte, never below: the lowest set bit is
// exact, which is all plainEnd reads.
func unplain(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := w ^ (ones * '"')
	s := w ^ (ones * '\\')
	return ((q-ones)&^q | (s-ones)&^s | (w-ones*0x20)&^w) & highs
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// stringLiteral reads a string literal, quotes included.
func (r *Reader) stringLiteral() []byte {
	if r.peek() != '"' {
		r.failed = true
		return nil
	}
	end := stringEnd(r.b, r.i)
	if end < 0 {
		r.failed = true
		return nil
	}
	lit := r.b[r.i:end]
	r.i = end
	return lit
}

func (r *Reader) literal(word string) {
	if !bytes.HasPrefix(r.b[r.i:], []byte(word)) {
		r.failed = true
		return
	}
	r.i += len(word)
}

// number reads a number as JSON's grammar has it.
func (r *Reader) number() []byte {
	start := r.i
	b := r.b
	i := r.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		r.failed = true
		return nil
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			r.failed = true
			return nil
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			r.failed = true
			return nil
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	r.i = i
	return b[start:i]
}

// unquote is a well-formed string literal's value: copied as it is when
// it has nothing to unescape or replace, else as encoding/json reads it.
func unquote(lit []byte) string {
	in := lit[1 : len(lit)-1]
	plain := true
	for _, c := range in {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return intern(in)
	}
	if bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
		return string(in)
	}
	var s string
	_ = json.Unmarshal(lit, &s) // a well-formed literal: cannot fail
	return s
}

// intern is s as a string, without allocating for the values that
// recur in every answer, chunk and polled video object.
func intern(s []byte) string {
	switch string(s) {
	case "":
		return ""
	case "video":
		return "video"
	case "queued":
		return "queued"
	case "in_progress":
		return "in_progress"
	case "completed":
		return "completed"
	case "failed":
		return "failed"
	case "sora-2":
		return "sora-2"
	case "sora-2-pro":
		return "sora-2-pro"
	case "720x1280":
		return "720x1280"
	case "1280x720":
		return "1280x720"
	case "1024x1792":
		return "1024x1792"
	case "1792x1024":
		return "1792x1024"
	case "12":
		return "12"
	case "assistant":
		return "assistant"
	case "chat.completion":
		return "chat.completion"
	case "chat.completion.chunk":
		return "chat.completion.chunk"
	case "function":
		return "function"
	case "stop":
		return "stop"
	case "length":
		return "length"
	case "tool_calls":
		return "tool_calls"
	case "default":
		return "default"
	}
	return string(s)
}
