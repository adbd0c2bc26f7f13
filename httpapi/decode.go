package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/openaiwire"
)

// endpoint is one OpenAI-compatible POST route.
type endpoint struct {
	name string         // metrics label and usage endpoint, e.g. "chat"
	path string         // upstream path under the platform's base URL
	kind weir.ModelKind // the model kind it serves
	// required names the body fields that must be present and non-empty.
	required []string
}

var (
	epChat       = endpoint{name: "chat", path: "/chat/completions", kind: weir.KindChat, required: []string{"messages"}}
	epEmbeddings = endpoint{name: "embeddings", path: "/embeddings", kind: weir.KindEmbeddings, required: []string{"input"}}
	epImages     = endpoint{name: "images", path: "/images/generations", kind: weir.KindImages, required: []string{"prompt"}}
	epSpeech     = endpoint{name: "speech", path: "/audio/speech", kind: weir.KindSpeech, required: []string{"input", "voice"}}
)

// request is a decoded client body: the fields Weir needs, and the body
// itself so that everything else passes through to the upstream untouched.
// It is held while the request waits, so it keeps nothing else of the
// decoding.
type request struct {
	body      []byte
	model     string
	stream    bool
	maxTokens int64
	// estimate is the tokens reserved against TPM before the upstream says.
	estimate int64
	// wants is what it needs of a candidate.
	wants weir.Wants
	// affinity is what it shares with the requests whose candidate it
	// prefers (a chat's prompt_cache_key, user, or first message).
	affinity string
	// previous is the response a Responses request continues
	// (previous_response_id), if it is passed through.
	previous string
	// modelEnd, if not 0, is where the model's value ends in a body Weir
	// encoded itself (translatedRequest), which starts with it: withModel
	// splices the upstream's name there without parsing the body.
	modelEnd int
}

// decodeRequest parses and validates a body for ep. It never panics on any
// input (FuzzDecodeRequest) and reports the offending parameter.
func decodeRequest(ep endpoint, body []byte) (*request, *apiError) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, errorf(weir.CodeInvalidRequest, "", "request body is empty")
	}
	if body[0] != '{' {
		return nil, errorf(weir.CodeInvalidRequest, "", "request body must be a JSON object")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, errorf(weir.CodeInvalidRequest, "", "request body is not valid JSON: "+err.Error())
	}
	r := &request{body: body}
	m, ok := raw["model"]
	if !ok {
		return nil, errorf(weir.CodeInvalidRequest, "model", "you must provide a model parameter")
	}
	if err := json.Unmarshal(m, &r.model); err != nil || r.model == "" {
		return nil, errorf(weir.CodeInvalidRequest, "model", "model must be a non-empty string")
	}
	if len(r.model) > maxModelName {
		return nil, errorf(weir.CodeInvalidRequest, "model", fmt.Sprintf("model is %d bytes long; at most %d are allowed", len(r.model), maxModelName))
	}
	for _, f := range ep.required {
		v, ok := raw[f]
		if !ok || isEmptyJSON(v) {
			return nil, errorf(weir.CodeInvalidRequest, f, fmt.Sprintf("missing required parameter: %s", f))
		}
	}
	if s, ok := raw["stream"]; ok && !isNull(s) {
		if ep.kind != weir.KindChat {
			return nil, errorf(weir.CodeInvalidRequest, "stream", "stream is only supported for chat completions")
		}
		if err := json.Unmarshal(s, &r.stream); err != nil {
			return nil, errorf(weir.CodeInvalidRequest, "stream", "stream must be a boolean")
		}
	}
	for _, f := range []string{"max_completion_tokens", "max_tokens"} {
		v, ok := raw[f]
		if !ok || isNull(v) {
			continue
		}
		var n int64
		if err := json.Unmarshal(v, &n); err != nil || n < 0 {
			return nil, errorf(weir.CodeInvalidRequest, f, f+" must be a non-negative integer")
		}
		if r.maxTokens == 0 {
			r.maxTokens = n
		}
	}
	if ep.kind == weir.KindChat {
		var msgs []json.RawMessage
		if err := json.Unmarshal(raw["messages"], &msgs); err != nil {
			return nil, errorf(weir.CodeInvalidRequest, "messages", "messages must be an array")
		}
		mayHaveImage := bytes.Contains(body, []byte("image"))
		for i, msg := range msgs {
			if len(msg) == 0 || msg[0] != '{' {
				return nil, errorf(weir.CodeInvalidRequest, "messages["+strconv.Itoa(i)+"]", "each message must be an object")
			}
			r.wants.Vision = r.wants.Vision || (mayHaveImage && hasImage(msg))
		}
		r.wants.Tools = isNonEmptyArray(raw["tools"]) || isNonEmptyArray(raw["functions"])
		r.affinity = affinityKey(raw, msgs)
		var rf struct {
			Type string `json:"type"`
		}
		if v, ok := raw["response_format"]; ok && json.Unmarshal(v, &rf) == nil {
			r.wants.JSONOutput = rf.Type == "json_object" || rf.Type == "json_schema"
		}
	}
	for _, f := range []struct {
		name string
		to   *string
	}{{"size", &r.wants.Size}, {"voice", &r.wants.Voice}, {"quality", &r.wants.Quality}} {
		if v, ok := raw[f.name]; ok {
			_ = json.Unmarshal(v, f.to) // not a string: the upstream's to judge
		}
	}
	r.wants.N, r.wants.Characters = priced(ep, raw)
	// About four bytes of JSON per token, plus what the answer may take.
	// The client's numbers may be anything up to the int64 maximum: the
	// sum saturates there rather than wrap negative.
	r.estimate = int64(len(body))/4 + 1
	r.wants.PromptTokens, r.wants.MaxTokens, r.wants.Stream = r.estimate, r.maxTokens, r.stream
	switch {
	case r.maxTokens > 0:
		r.estimate = addTokens(r.estimate, r.maxTokens)
	case ep.kind == weir.KindChat:
		r.estimate = addTokens(r.estimate, 256)
	}
	return r, nil
}

// priced is what a price reads of a request for ep besides its tokens:
// the images asked for (n; 0 if not said, or not a count, which the
// upstream judges), and the characters of the input to speech.
func priced(ep endpoint, raw map[string]json.RawMessage) (n, characters int64) {
	switch ep.kind {
	case weir.KindImages:
		if v, ok := raw["n"]; ok && json.Unmarshal(v, &n) != nil || n < 0 {
			n = 0
		}
	case weir.KindSpeech:
		var input string
		if json.Unmarshal(raw["input"], &input) == nil {
			characters = int64(utf8.RuneCountInString(input))
		}
	}
	return n, characters
}

// translatedRequest is what decodeRequest reads of the chat body
// json.Marshal makes of c, a dialect's translation, read from c instead
// of the body: the same fields, the same checks, the same answers to a
// malformed request, without parsing the body again.
func translatedRequest(ep endpoint, c *openaiwire.ChatRequest) (*request, *apiError) {
	body, err := c.Marshal()
	if err != nil {
		return nil, errorf(weir.CodeInvalidRequest, "", "could not encode the translated request: "+err.Error())
	}
	// The encoding starts {"model":"...", the order of ChatRequest's
	// fields.
	const modelAt = len(`{"model":`)
	end := modelAt + jsonValueLen(body[modelAt:])
	r := &request{body: body, model: c.Model, stream: c.Stream, modelEnd: end}
	switch {
	case r.model == "":
		return nil, errorf(weir.CodeInvalidRequest, "model", "model must be a non-empty string")
	case len(r.model) > maxModelName:
		return nil, errorf(weir.CodeInvalidRequest, "model", fmt.Sprintf("model is %d bytes long; at most %d are allowed", len(r.model), maxModelName))
	case len(c.Messages) == 0:
		return nil, errorf(weir.CodeInvalidRequest, "messages", "missing required parameter: messages")
	}
	for _, f := range []struct {
		name string
		n    *int64
	}{{"max_completion_tokens", c.MaxCompletionTokens}, {"max_tokens", c.MaxTokens}} {
		switch {
		case f.n == nil:
		case *f.n < 0:
			return nil, errorf(weir.CodeInvalidRequest, f.name, f.name+" must be a non-negative integer")
		case r.maxTokens == 0:
			r.maxTokens = *f.n
		}
	}
	if bytes.Contains(body, []byte("image")) {
		for _, m := range c.Messages {
			r.wants.Vision = r.wants.Vision || contentHasImage(m.Content)
		}
	}
	r.wants.Tools = len(c.Tools) > 0 || len(c.Functions) > 0
	switch {
	case c.PromptCacheKey != "":
		r.affinity = "k:" + c.PromptCacheKey
	case c.User != "":
		r.affinity = "u:" + c.User
	default:
		// The first message as the body has it: it follows the model.
		first := end + len(`,"messages":[`)
		r.affinity = promptAffinity(body[first : first+jsonValueLen(body[first:])])
	}
	if f := c.ResponseFormat; f != nil {
		r.wants.JSONOutput = f.Type == "json_object" || f.Type == "json_schema"
	}
	r.estimate = int64(len(body))/4 + 1
	r.wants.PromptTokens, r.wants.MaxTokens, r.wants.Stream = r.estimate, r.maxTokens, r.stream
	if r.maxTokens > 0 {
		r.estimate = addTokens(r.estimate, r.maxTokens)
	} else {
		r.estimate = addTokens(r.estimate, 256)
	}
	return r, nil
}

// jsonValueLen is the length of the JSON value b starts with, which must
// be valid, compact JSON (as json.Marshal writes it): a string, or an
// object or array followed by more.
func jsonValueLen(b []byte) int {
	depth, inString := 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString:
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
				if depth == 0 {
					return i + 1
				}
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return len(b)
}

// addTokens is a+b for token counts a, b >= 0, saturating at the int64
// maximum: a count that big can never be admitted against a TPM limit
// anyway, and one that wrapped negative would be refused as invalid.
func addTokens(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// readBody reads all of body into a buffer sized for the declared
// length, so that a waiting request holds its body and no spare capacity.
// It preallocates at most maxPrealloc on the client's word; a longer body
// grows the buffer as it arrives, as io.ReadAll does.
func readBody(body io.Reader, declared int64) ([]byte, error) {
	const maxPrealloc = 16 << 10
	size := 512
	if declared > 0 {
		// One byte more than declared, so that reading the end needs no
		// growth.
		size = int(min(declared, maxPrealloc)) + 1
	}
	b := make([]byte, 0, size)
	for {
		n, err := body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// withModel returns the body with the model replaced by the upstream's
// name. It splices the new name into the body as the client sent it,
// replacing every top-level "model" member, in any letter case (a body
// naming it twice, or as "MODEL", which Go's encoding/json and so some
// upstreams take for the same field, must not smuggle its own choice past
// the mapping), and leaves every other byte alone.
func (r *request) withModel(upstream string) ([]byte, error) {
	name, err := json.Marshal(upstream)
	if err != nil {
		return nil, err
	}
	if r.modelEnd > 0 {
		const modelAt = len(`{"model":`)
		out := make([]byte, 0, len(r.body)-(r.modelEnd-modelAt)+len(name))
		out = append(append(append(out, r.body[:modelAt]...), name...), r.body[r.modelEnd:]...)
		return out, nil
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	if _, err := dec.Token(); err != nil { // {
		return nil, err
	}
	var spans [][2]int64
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if k, _ := key.(string); strings.EqualFold(k, "model") {
			end := dec.InputOffset()
			spans = append(spans, [2]int64{end - int64(len(v)), end})
		}
	}
	out := make([]byte, 0, len(r.body)+len(name))
	last := int64(0)
	for _, sp := range spans {
		out = append(out, r.body[last:sp[0]]...)
		out = append(out, name...)
		last = sp[1]
	}
	return append(out, r.body[last:]...), nil
}

func isNull(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("null")) }

func isEmptyJSON(v json.RawMessage) bool {
	switch string(bytes.TrimSpace(v)) {
	case "", "null", `""`, "[]", "{}":
		return true
	}
	return false
}

// WithModel implements gateway.Body.
func (r *request) WithModel(upstream string) ([]byte, error) { return r.withModel(upstream) }

// hasImage reports whether a chat message's content has an image part.
func hasImage(msg json.RawMessage) bool {
	var m struct {
		Content json.RawMessage `json:"content"`
	}
	return json.Unmarshal(msg, &m) == nil && contentHasImage(m.Content)
}

// contentHasImage reports whether a chat message's content has an image
// part.
func contentHasImage[T ~[]byte](content T) bool {
	if len(content) == 0 || content[0] != '[' {
		return false
	}
	var parts []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal([]byte(content), &parts) != nil {
		return false
	}
	for _, p := range parts {
		if p.Type == "image_url" || p.Type == "input_image" || p.Type == "image" {
			return true
		}
	}
	return false
}

// isNonEmptyArray reports whether v is a JSON array with an element.
func isNonEmptyArray(v json.RawMessage) bool {
	var a []json.RawMessage
	return len(v) > 0 && v[0] == '[' && json.Unmarshal(v, &a) == nil && len(a) > 0
}

// affinityKey is what a chat request shares with the others whose
// candidate it prefers: its prompt_cache_key (OpenAI's field for this),
// else its user, else its first message (a system prompt, the start of a
// conversation), hashed.
func affinityKey(raw map[string]json.RawMessage, msgs []json.RawMessage) string {
	for _, f := range []struct{ field, prefix string }{{"prompt_cache_key", "k:"}, {"user", "u:"}} {
		var v string
		if json.Unmarshal(raw[f.field], &v) == nil && v != "" {
			return f.prefix + v
		}
	}
	if len(msgs) == 0 {
		return ""
	}
	return promptAffinity(msgs[0])
}

// promptAffinity is the affinity of a chat request by its first message.
func promptAffinity(first []byte) string {
	h := fnv.New64a()
	h.Write(first)
	return "p:" + strconv.FormatUint(h.Sum64(), 36)
}
