package fastjson

import (
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string, escaped as json.Marshal
// escapes it: HTML's <, > and & and the line and paragraph separators
// as \u escapes, invalid UTF-8 as \ufffd.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendFloat appends f, a finite float64, as json.Marshal writes it.
// A float that is a whole number of thousandths (milliseconds to the
// microsecond, as logs write durations) is written from that number,
// without strconv's search for the shortest digits.
func AppendFloat(b []byte, f float64) []byte {
	if n, ok := thousandths(f); ok {
		return appendThousandths(b, n)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 as e-9, as json.Marshal writes it.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// maxThousandths bounds the thousandths AppendFloat writes itself: a
// decimal of at most 15 significant digits is the only one of so few
// that rounds to its float64, so it is the float's shortest form, the
// one json.Marshal writes.
const maxThousandths = 1e15

// thousandths is n if f is the float64 nearest to n/1000 (what
// float64(n)/1000 makes), |n| < maxThousandths, and f is not -0 (which
// json.Marshal writes as -0).
func thousandths(f float64) (int64, bool) {
	m := math.Round(f * 1000)
	if !(math.Abs(m) < maxThousandths) { // NaN too
		return 0, false
	}
	n := int64(m)
	return n, float64(n)/1000 == f && (n != 0 || !math.Signbit(f))
}

// appendThousandths appends n/1000 as a decimal, as strconv's 'f' format
// writes its shortest form: no trailing zeros, no point for a whole number.
func appendThousandths(b []byte, n int64) []byte {
	if n < 0 {
		b = append(b, '-')
		n = -n
	}
	b = strconv.AppendInt(b, n/1000, 10)
	r := n % 1000
	if r == 0 {
		return b
	}
	b = append(b, '.', byte('0'+r/100), byte('0'+r/10%10), byte('0'+r%10))
	for b[len(b)-1] == '0' {
		b = b[:len(b)-1]
	}
	return b
}

// AppendFloat64 appends f as AppendFloat does, or fails as json.Marshal
// fails on NaN and the infinities.
func AppendFloat64(b []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return AppendValue(b, f)
	}
	return AppendFloat(b, f), nil
}

// AppendValue appends v as json.Marshal writes it, for the values a
// writer has no faster way with.
func AppendValue(b []byte, v any) ([]byte, error) {
	out, err := json.Marshal(v)
	if err != nil {
		return b, err
	}
	return append(b, out...), nil
}

// AppendRaw appends raw, a JSON value, as json.Marshal writes a
// json.RawMessage field: compacted, HTML's characters and the line and
// paragraph separators escaped; empty (a nil field) as null. Raw that
// is not JSON is json.Marshal's error.
func AppendRaw(b []byte, raw []byte) ([]byte, error) {
	if len(raw) == 0 {
		return append(b, "null"...), nil
	}
	r := NewReader(raw)
	r.Skip()
	if !r.End() {
		return AppendValue(b, json.RawMessage(raw))
	}
	return appendCompact(b, raw), nil
}

// appendCompact appends raw, well-formed JSON, without the spaces
// between its tokens and with <, >, &, U+2028 and U+2029 escaped, as
// encoding/json compacts a marshaller's output.
func appendCompact(b, raw []byte) []byte {
	start, inString := 0, false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case !inString:
			if isSpace(c) {
				b = append(b, raw[start:i]...)
				start = i + 1
			} else if c == '"' {
				inString = true
			}
		case c == '\\':
			i++ // the escaped byte, kept
		case c == '"':
			inString = false
		case c == '<' || c == '>' || c == '&':
			b = append(b, raw[start:i]...)
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			start = i + 1
		case c == 0xe2 && i+2 < len(raw) && raw[i+1] == 0x80 && raw[i+2]&^1 == 0xa8:
			b = append(b, raw[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[raw[i+2]&0xf])
			i += 2
			start = i + 1
		}
	}
	return append(b, raw[start:]...)
}
