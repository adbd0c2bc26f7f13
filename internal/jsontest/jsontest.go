// Package jsontest compares JSON in tests by what it says: object keys in
// any order and spaces aside, but numbers as written, so that a
// translation that loses a digit of a big integer, or writes 1 as 1.0,
// is caught.
package jsontest

import (
	"bytes"
	"encoding/json"
	"testing"
)

// canonical is b with its object keys sorted, no spaces, and its numbers
// as written.
func canonical(b []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	out, err := json.Marshal(v)
	return string(out), err
}

// Canonical is b re-encoded with its object keys sorted, no spaces, and
// its numbers as written, to compare two bodies by what they say; t
// fails if b is not JSON.
func Canonical(t testing.TB, b []byte) string {
	t.Helper()
	s, err := canonical(b)
	if err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return s
}

// Same reports whether a and b are JSON that say the same; false if
// either is not JSON.
func Same(a, b []byte) bool {
	x, err := canonical(a)
	if err != nil {
		return false
	}
	y, err := canonical(b)
	return err == nil && x == y
}

// Equal fails t unless got is JSON that says what want says.
func Equal(t testing.TB, got []byte, want string) {
	t.Helper()
	g, w := Canonical(t, got), Canonical(t, []byte(want))
	if g != w {
		t.Fatalf("JSON differs\n got: %s\nwant: %s", g, w)
	}
}
