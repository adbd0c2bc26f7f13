package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/openaiwire"
	"github.com/weir-gateway/weir/tokens"
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
	// estimate is the tokens reserved against TPM before the upstream
	// says, where the encoding of the candidate is not known (countPrompt).
	estimate int64
	// prompt counts the prompt in a candidate's encoding; nil: the
	// estimate stands for every candidate. It is ownPrompt when set
	// (countPrompt), held with the request rather than allocated apart.
	prompt    *tokens.Prompt
	ownPrompt tokens.Prompt
	// wants is what it needs of a candidate.
	wants weir.Wants
	// affinity is what it shares with the requests whose candidate it
	// prefers (a chat's prompt_cache_key, user, or first message).
	affinity string
	// endUser is the end user the request names (endUserOf), "" none.
	endUser string
	// previous is the response a Responses request continues
	// (previous_response_id), if it is passed through.
	previous string
	// models are where the body's top-level "model" values are, when the
	// decoding knows: withModel splices the upstream's name there without
	// parsing the body again.
	models modelSpans
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
	f, ok := scanFields(body)
	if !ok {
		var err error
		if f, err = readFields(body); err != nil {
			return nil, errorf(weir.CodeInvalidRequest, "", "request body is not valid JSON: "+err.Error())
		}
	}
	r := &request{body: body, models: f.models}
	if f.model == nil {
		return nil, errorf(weir.CodeInvalidRequest, "model", "you must provide a model parameter")
	}
	if r.model, ok = jsonString(f.model); !ok || r.model == "" {
		return nil, errorf(weir.CodeInvalidRequest, "model", "model must be a non-empty string")
	}
	if len(r.model) > maxModelName {
		return nil, errorf(weir.CodeInvalidRequest, "model", fmt.Sprintf("model is %d bytes long; at most %d are allowed", len(r.model), maxModelName))
	}
	for _, name := range ep.required {
		if v := f.get(name); v == nil || isEmptyJSON(v) {
			return nil, errorf(weir.CodeInvalidRequest, name, fmt.Sprintf("missing required parameter: %s", name))
		}
	}
	if f.stream != nil && !isNull(f.stream) {
		if ep.kind != weir.KindChat {
			return nil, errorf(weir.CodeInvalidRequest, "stream", "stream is only supported for chat completions")
		}
		if r.stream, ok = jsonBool(f.stream); !ok {
			return nil, errorf(weir.CodeInvalidRequest, "stream", "stream must be a boolean")
		}
	}
	for _, m := range [...]struct {
		name string
		v    []byte
	}{{"max_completion_tokens", f.maxCompletionTokens}, {"max_tokens", f.maxTokens}} {
		if m.v == nil || isNull(m.v) {
			continue
		}
		n, ok := jsonInt64(m.v)
		if !ok || n < 0 {
			return nil, errorf(weir.CodeInvalidRequest, m.name, m.name+" must be a non-negative integer")
		}
		if r.maxTokens == 0 {
			r.maxTokens = n
		}
	}
	if ep.kind == weir.KindChat {
		if aerr := r.readMessages(&f); aerr != nil {
			return nil, aerr
		}
	}
	for _, w := range [...]struct {
		v  []byte
		to *string
	}{{f.size, &r.wants.Size}, {f.voice, &r.wants.Voice}, {f.quality, &r.wants.Quality}} {
		if w.v != nil {
			*w.to, _ = jsonString(w.v) // not a string: the upstream's to judge
		}
	}
	var aerr *apiError
	if r.endUser, aerr = endUserField(f.safetyIdentifier, f.user); aerr != nil {
		return nil, aerr
	}
	r.wants.N, r.wants.Characters = priced(ep, &f)
	r.countPrompt(ep.kind == weir.KindChat)
	return r, nil
}

// countPrompt sets what r reserves before its upstream reports usage:
// its prompt (tokens.Prompt, counted in each candidate's encoding as the
// gateway asks), its estimate (the prompt's by tokens.Estimate), and the
// tokens reserved against TPM where the encoding is not known: the
// estimate and what the answer may take, max_tokens, else 256 for a
// chat. The client's numbers may be anything up to the int64 maximum:
// the sum saturates there rather than wrap negative.
func (r *request) countPrompt(chat bool) {
	r.ownPrompt.Init(r.body)
	r.prompt = &r.ownPrompt
	r.estimate = r.prompt.Tokens(weir.TokenizerEstimate)
	r.wants.PromptTokens, r.wants.MaxTokens, r.wants.Stream = r.estimate, r.maxTokens, r.stream
	switch {
	case r.maxTokens > 0:
		r.estimate = tokens.Add(r.estimate, r.maxTokens)
	case chat:
		r.estimate = tokens.Add(r.estimate, 256)
	}
}

// endUserField is the end user a body's safety_identifier names, else
// its user (endUserOf): each must be a string, or null.
func endUserField(safetyIdentifier, user []byte) (string, *apiError) {
	var ids [2]string
	for i, f := range [...]struct {
		name string
		v    []byte
	}{{"safety_identifier", safetyIdentifier}, {"user", user}} {
		if f.v == nil || isNull(f.v) {
			continue
		}
		v, ok := jsonString(f.v)
		if !ok {
			return "", errorf(weir.CodeInvalidRequest, f.name, f.name+" must be a string")
		}
		ids[i] = v
	}
	return endUserOf(ids[0], ids[1])
}

// endUserOf is the end user a request names, whose spend budgets of end
// users count (docs/budgets.md): its safety_identifier, OpenAI's field
// for the end user, else its user ("" none). One weir.ValidateEndUser
// refuses is refused, naming the parameter, and never cut short: two end
// users cut to one id would share a budget.
func endUserOf(safetyIdentifier, user string) (string, *apiError) {
	for _, f := range [...]struct{ name, v string }{{"safety_identifier", safetyIdentifier}, {"user", user}} {
		if err := checkEndUser(f.name, f.v); err != nil {
			return "", err
		}
	}
	if safetyIdentifier != "" {
		return safetyIdentifier, nil
	}
	return user, nil
}

// checkEndUser refuses an end user id weir.ValidateEndUser refuses, as
// the parameter param.
func checkEndUser(param, v string) *apiError {
	if err := weir.ValidateEndUser(v); err != nil {
		return errorf(weir.CodeInvalidRequest, param, fmt.Sprintf("%s names an end user: %s", param, strings.TrimPrefix(err.Error(), weir.ErrInvalid.Error()+": ")))
	}
	return nil
}

// readMessages checks a chat body's messages and reads what choosing its
// candidate needs of them and of the fields beside them: images, tools,
// the output format, and the affinity.
func (r *request) readMessages(f *fields) *apiError {
	mayHaveImage := bytes.Contains(r.body, []byte("image"))
	var first []byte
	bad := -1
	isArray := arrayElements(f.messages, func(i int, msg []byte) bool {
		if len(msg) == 0 || msg[0] != '{' {
			bad = i
			return false
		}
		if i == 0 {
			first = msg
		}
		r.wants.Vision = r.wants.Vision || (mayHaveImage && hasImage(msg))
		return true
	})
	switch {
	case !isArray:
		return errorf(weir.CodeInvalidRequest, "messages", "messages must be an array")
	case bad >= 0:
		return errorf(weir.CodeInvalidRequest, "messages["+strconv.Itoa(bad)+"]", "each message must be an object")
	}
	r.wants.Tools = isNonEmptyArray(f.tools) || isNonEmptyArray(f.functions)
	r.affinity = affinityKey(f, first)
	if f.responseFormat != nil {
		var rf struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(f.responseFormat, &rf) == nil {
			r.wants.JSONOutput = rf.Type == "json_object" || rf.Type == "json_schema"
		}
	}
	return nil
}

// priced is what a price reads of a request for ep besides its tokens:
// the images asked for (n; 0 if not said, or not a count, which the
// upstream judges), and the characters of the input to speech.
func priced(ep endpoint, f *fields) (n, characters int64) {
	switch ep.kind {
	case weir.KindImages:
		if f.n != nil {
			var ok bool
			if n, ok = jsonInt64(f.n); !ok || n < 0 {
				n = 0
			}
		}
	case weir.KindSpeech:
		if input, ok := jsonString(f.input); ok {
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
	r := &request{body: body, model: c.Model, stream: c.Stream}
	r.models.add(modelAt, end)
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
	var aerr *apiError
	if r.endUser, aerr = endUserOf(c.SafetyIdentifier, c.User); aerr != nil {
		return nil, aerr
	}
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
	r.countPrompt(true)
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

// withModel returns the body with the model replaced by the upstream's
// name. It splices the new name into the body as the client sent it,
// replacing every top-level "model" member, in any letter case (a body
// naming it twice, or as "MODEL", which Go's encoding/json and so some
// upstreams take for the same field, must not smuggle its own choice past
// the mapping), and leaves every other byte alone.
func (r *request) withModel(upstream string) ([]byte, error) {
	if r.models.known {
		return r.models.splice(r.body, upstream), nil
	}
	name, err := json.Marshal(upstream)
	if err != nil {
		return nil, err
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
func isNonEmptyArray(v []byte) bool {
	if len(v) == 0 || v[0] != '[' {
		return false
	}
	nonEmpty := false
	return arrayElements(v, func(int, []byte) bool {
		nonEmpty = true
		return false
	}) && nonEmpty
}

// affinityKey is what a chat request shares with the others whose
// candidate it prefers: its prompt_cache_key (OpenAI's field for this),
// else its user, else its first message (a system prompt, the start of a
// conversation), hashed.
func affinityKey(f *fields, first []byte) string {
	for _, a := range [...]struct {
		v      []byte
		prefix string
	}{{f.promptCacheKey, "k:"}, {f.user, "u:"}} {
		if a.v == nil {
			continue
		}
		if v, ok := jsonString(a.v); ok && v != "" {
			return a.prefix + v
		}
	}
	if first == nil {
		return ""
	}
	return promptAffinity(first)
}

// promptAffinity is the affinity of a chat request by its first message:
// "p:" and the message's 64-bit FNV-1a hash in base 36.
func promptAffinity(first []byte) string {
	const offset64, prime64 = 14695981039346656037, 1099511628211
	h := uint64(offset64)
	for _, c := range first {
		h ^= uint64(c)
		h *= prime64
	}
	var buf [2 + 13]byte // "p:" and at most 13 base-36 digits
	return string(strconv.AppendUint(append(buf[:0], "p:"...), h, 36))
}
