package gemini

import "encoding/json"

// googleExtra is what Gemini adds to a Chat Completions tool call (its
// extra_content): the call's thought signature.
type googleExtra struct {
	Google *struct {
		ThoughtSignature string `json:"thought_signature,omitempty"`
	} `json:"google,omitempty"`
}

// signatureExtra is a tool call's extra_content carrying sig; nil for
// none.
func signatureExtra(sig string) json.RawMessage {
	if sig == "" {
		return nil
	}
	e := googleExtra{Google: &struct {
		ThoughtSignature string `json:"thought_signature,omitempty"`
	}{ThoughtSignature: sig}}
	b, _ := json.Marshal(e) // a string: cannot fail
	return b
}

// signature is the thought signature in a tool call's extra_content.
func signature(extra json.RawMessage) string {
	var e googleExtra
	if len(extra) == 0 || json.Unmarshal(extra, &e) != nil || e.Google == nil {
		return ""
	}
	return e.Google.ThoughtSignature
}
