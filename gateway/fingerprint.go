package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/weir-gateway/weir"
)

// requestFingerprint identifies a task request for Idempotency-Key
// checks, as the IETF httpapi Idempotency-Key draft asks: a key reused
// with a different request is refused (422), a key reused with the same
// request returns the task the first one made. It is the hex SHA-256 of
// the task's kind, model, input, callback URL and callback events, with
// the input canonicalised so that what JSON does not distinguish does not
// count: object keys in any order, whitespace, string escapes. Numbers
// are compared as written (8 and 8.0 differ), and a form field's text is
// not its JSON value ("8" is not 8). events must be normalised (sorted,
// without repeats: TaskRequest says they are); a request without events has the
// fingerprint it had before events were asked for, so that a repeat of a
// task stored then still matches.
func requestFingerprint(kind, model string, input map[string]json.RawMessage, callback string, events []weir.TaskEvent, mode weir.RunMode, run string) (string, error) {
	canon := make(map[string]any, len(input))
	for k, raw := range input {
		v, err := canonicalJSON(raw)
		if err != nil {
			return "", fmt.Errorf("field %q: %w", k, err)
		}
		canon[k] = v
	}
	// An array, so that no field's text can run into the next one's.
	fields := []any{"weir-task-request-v1", kind, model, canon, callback}
	if len(events) > 0 || mode != "" {
		fields = append(fields, events)
	}
	if mode != "" {
		// Production's fingerprints stay as they were: a task stored
		// before run modes is still the same request.
		fields = append(fields, mode, run)
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// canonicalJSON decodes raw keeping numbers as written; encoding/json
// then marshals objects with their keys sorted and no whitespace.
func canonicalJSON(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}
