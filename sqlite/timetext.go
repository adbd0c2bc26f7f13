package sqlite

import "time"

// appendTime appends t as formatTime writes it (timeLayout, UTC, to the
// microsecond, truncated). Years 0 to 9999, every time the gateway
// records, are written digit by digit: time.Time.AppendFormat reads the
// layout again for each time, which was most of the cost of a usage
// row's time; others through AppendFormat.
func appendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.Truncate(time.Microsecond).AppendFormat(b, timeLayout)
	}
	hour, minute, sec := t.Clock()
	b = appendDigits(b, year, 4)
	b = appendDigits(append(b, '-'), int(month), 2)
	b = appendDigits(append(b, '-'), day, 2)
	b = appendDigits(append(b, 'T'), hour, 2)
	b = appendDigits(append(b, ':'), minute, 2)
	b = appendDigits(append(b, ':'), sec, 2)
	b = appendDigits(append(b, '.'), t.Nanosecond()/1000, 6)
	return append(b, 'Z')
}

// appendDigits appends the width last decimal digits of n, n >= 0, with
// leading zeros.
func appendDigits(b []byte, n, width int) []byte {
	start := len(b)
	for range width {
		b = append(b, 0)
	}
	for i := len(b) - 1; i >= start; i-- {
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return b
}
