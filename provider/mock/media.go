package mock

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"image"
	"image/color"
	"image/png"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// ---- embeddings

type embeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
}

const (
	defaultDimensions = 1536 // text-embedding-3-small's
	maxDimensions     = 4096
	maxInputs         = 2048 // OpenAI's limit on inputs per request
)

// embedInput is one input: its token count and the hash that picks its
// vector, so the same input always embeds the same way.
type embedInput struct {
	tokens int
	hash   uint64
}

// embeddings serves POST /v1/embeddings.
func (s *Server) embeddings(c *call) int {
	var req embeddingRequest
	if err := json.Unmarshal(c.body, &req); err != nil {
		return c.fail(invalidRequest("", "We could not parse the JSON body of your request: "+err.Error()))
	}
	o, err := parseOverrides(c.r.Header)
	if err != nil {
		return c.fail(invalidRequest("", err.Error()))
	}
	inputs, err := parseEmbedInput(req.Input)
	if err != nil {
		return c.fail(invalidRequest("input", err.Error()))
	}
	b64 := false
	switch req.EncodingFormat {
	case "", "float":
	case "base64":
		b64 = true
	default:
		return c.fail(invalidRequest("encoding_format", fmt.Sprintf("Invalid 'encoding_format': %q is not one of 'float' or 'base64'.", req.EncodingFormat)))
	}
	dims := defaultDimensions
	if req.Dimensions != nil {
		if *req.Dimensions < 1 || *req.Dimensions > maxDimensions {
			return c.fail(invalidRequest("dimensions", fmt.Sprintf("Invalid 'dimensions': must be from 1 to %d.", maxDimensions)))
		}
		dims = *req.Dimensions
	}
	if status := s.begin(c, req.Model, o); status != 0 {
		return status
	}

	v := vectorFor(dims)
	per := len(v.raw) * 4 / 3
	if !b64 {
		per = v.textLen
	}
	b := make([]byte, 0, 128+len(req.Model)+len(inputs)*(per+48))
	b = append(b, `{"object":"list","data":[`...)
	tokens := 0
	for i, in := range inputs {
		tokens += in.tokens
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":`...)
		shift := int(in.hash % uint64(dims))
		if b64 {
			b = append(b, '"')
			b = v.appendBase64(b, shift)
			b = append(b, '"')
		} else {
			b = v.appendFloats(b, shift)
		}
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = appendJSONString(b, req.Model)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(tokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(tokens), 10)
	b = append(b, "}}\n"...)
	writeJSON(c.w, b)
	return http.StatusOK
}

// parseEmbedInput reads a string, an array of strings, an array of tokens
// or an array of token arrays.
func parseEmbedInput(raw json.RawMessage) ([]embedInput, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, fmt.Errorf("'input' is required")
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("'input': %v", err)
		}
		if s == "" {
			return nil, fmt.Errorf("'input' cannot be an empty string")
		}
		return []embedInput{textInput(s)}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("'input' must be a string, an array of strings, an array of tokens or an array of token arrays")
	}
	if len(items) == 0 || len(items) > maxInputs {
		return nil, fmt.Errorf("'input' must hold from 1 to %d items", maxInputs)
	}
	first := bytes.TrimSpace(items[0])
	if len(first) == 0 {
		return nil, fmt.Errorf("'input' must hold strings or tokens")
	}
	switch first[0] {
	case '"':
		var ss []string
		if err := json.Unmarshal(raw, &ss); err != nil {
			return nil, fmt.Errorf("'input' mixes strings with other things")
		}
		out := make([]embedInput, len(ss))
		for i, s := range ss {
			if s == "" {
				return nil, fmt.Errorf("'input[%d]' cannot be an empty string", i)
			}
			out[i] = textInput(s)
		}
		return out, nil
	case '[':
		var tss [][]int
		if err := json.Unmarshal(raw, &tss); err != nil {
			return nil, fmt.Errorf("'input' must hold arrays of integer tokens")
		}
		out := make([]embedInput, len(tss))
		for i, ts := range tss {
			if len(ts) == 0 {
				return nil, fmt.Errorf("'input[%d]' cannot be empty", i)
			}
			out[i] = tokenInput(ts)
		}
		return out, nil
	default:
		var ts []int
		if err := json.Unmarshal(raw, &ts); err != nil {
			return nil, fmt.Errorf("'input' must hold integer tokens")
		}
		return []embedInput{tokenInput(ts)}, nil
	}
}

func textInput(s string) embedInput {
	h := fnv.New64a()
	h.Write([]byte(s))
	return embedInput{tokens: estimateTokens(len(s)), hash: h.Sum64()}
}

func tokenInput(ts []int) embedInput {
	h := fnv.New64a()
	var buf [8]byte
	for _, t := range ts {
		binary.LittleEndian.PutUint64(buf[:], uint64(t))
		h.Write(buf[:])
	}
	return embedInput{tokens: len(ts), hash: h.Sum64()}
}

// vector is one unit vector of some width, encoded once; an input's
// embedding is it rotated by the input's hash, still of length one.
type vector struct {
	text    [][]byte // each element as JSON
	textLen int      // the JSON array's length
	raw     []byte   // little-endian float32s, as base64 encodes them
}

var vectors sync.Map // width → *vector

func vectorFor(dims int) *vector {
	if v, ok := vectors.Load(dims); ok {
		return v.(*vector)
	}
	vals := make([]float64, dims)
	var norm float64
	r := newRNG(uint64(dims), 1)
	for i := range vals {
		vals[i] = 2*r.float() - 1
		norm += vals[i] * vals[i]
	}
	norm = math.Sqrt(norm)
	v := &vector{text: make([][]byte, dims), raw: make([]byte, 4*dims)}
	v.textLen = 2 + dims - 1
	for i, x := range vals {
		f := float32(x / norm)
		v.text[i] = strconv.AppendFloat(nil, float64(f), 'g', -1, 32)
		v.textLen += len(v.text[i])
		binary.LittleEndian.PutUint32(v.raw[4*i:], math.Float32bits(f))
	}
	actual, _ := vectors.LoadOrStore(dims, v)
	return actual.(*vector)
}

func (v *vector) appendFloats(b []byte, shift int) []byte {
	b = append(b, '[')
	n := len(v.text)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, v.text[(i+shift)%n]...)
	}
	return append(b, ']')
}

func (v *vector) appendBase64(b []byte, shift int) []byte {
	rotated := make([]byte, 0, len(v.raw))
	rotated = append(rotated, v.raw[4*shift:]...)
	rotated = append(rotated, v.raw[:4*shift]...)
	return base64.StdEncoding.AppendEncode(b, rotated)
}

// ---- images

type imageRequest struct {
	Model          string `json:"model"`
	Prompt         string `json:"prompt"`
	N              *int   `json:"n"`
	ResponseFormat string `json:"response_format"`
	Size           string `json:"size"`
	Quality        string `json:"quality"`
}

// imagePath serves the PNG that url answers point to.
const imagePath = "/mock/images/mock.png"

// mockPNG is a small gradient, and mockPNGBase64 its b64_json.
var mockPNG, mockPNGBase64 = func() ([]byte, string) {
	img := image.NewNRGBA(image.Rect(0, 0, 32, 32))
	for y := range 32 {
		for x := range 32 {
			img.Set(x, y, color.NRGBA{R: uint8(x * 8), G: uint8(y * 8), B: 160, A: 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic(err) // encoding a fixed in-memory image cannot fail
	}
	return buf.Bytes(), base64.StdEncoding.EncodeToString(buf.Bytes())
}()

// images serves POST /v1/images/generations. Without response_format, a
// dall-e-* model answers with a url and any other with b64_json, as
// OpenAI's do; gpt-image-* models report usage.
func (s *Server) images(c *call) int {
	var req imageRequest
	if err := json.Unmarshal(c.body, &req); err != nil {
		return c.fail(invalidRequest("", "We could not parse the JSON body of your request: "+err.Error()))
	}
	o, err := parseOverrides(c.r.Header)
	if err != nil {
		return c.fail(invalidRequest("", err.Error()))
	}
	if req.Model == "" {
		req.Model = "dall-e-2" // OpenAI's default for this endpoint
	}
	if strings.TrimSpace(req.Prompt) == "" {
		return c.fail(invalidRequest("prompt", "'prompt' is required."))
	}
	return s.answerImages(c, req, o)
}

// answerImages answers an image request (a generation, an edit or a
// variation), checked but for n and response_format.
func (s *Server) answerImages(c *call, req imageRequest, o overrides) int {
	n := 1
	if req.N != nil {
		if *req.N < 1 || *req.N > 10 {
			return c.fail(invalidRequest("n", "Invalid 'n': must be from 1 to 10."))
		}
		n = *req.N
	}
	url := strings.HasPrefix(req.Model, "dall-e")
	switch req.ResponseFormat {
	case "":
	case "url":
		url = true
	case "b64_json":
		url = false
	default:
		return c.fail(invalidRequest("response_format", fmt.Sprintf("Invalid 'response_format': %q is not one of 'url' or 'b64_json'.", req.ResponseFormat)))
	}
	if status := s.begin(c, req.Model, o); status != 0 {
		return status
	}

	var link string
	if url {
		scheme := "http"
		if c.r.TLS != nil {
			scheme = "https"
		}
		link = scheme + "://" + c.r.Host + imagePath
	}
	b := make([]byte, 0, 256+len(req.Prompt)+n*(len(mockPNGBase64)+len(link)+len(req.Prompt)+48))
	b = append(b, `{"created":`...)
	b = strconv.AppendInt(b, s.now().Unix(), 10)
	b = append(b, `,"data":[`...)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		if url {
			b = append(b, `{"url":`...)
			b = appendJSONString(b, link)
		} else {
			b = append(b, `{"b64_json":"`...)
			b = append(b, mockPNGBase64...)
			b = append(b, '"')
		}
		if strings.HasPrefix(req.Model, "dall-e-3") {
			b = append(b, `,"revised_prompt":`...)
			b = appendJSONString(b, req.Prompt)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	if strings.HasPrefix(req.Model, "gpt-image") {
		in := estimateTokens(len(req.Prompt))
		out := 272 * n // a low-quality 1024x1024 image's tokens
		b = append(b, `,"output_format":"png","usage":{"input_tokens":`...)
		b = strconv.AppendInt(b, int64(in), 10)
		b = append(b, `,"input_tokens_details":{"text_tokens":`...)
		b = strconv.AppendInt(b, int64(in), 10)
		b = append(b, `,"image_tokens":0},"output_tokens":`...)
		b = strconv.AppendInt(b, int64(out), 10)
		b = append(b, `,"total_tokens":`...)
		b = strconv.AppendInt(b, int64(in+out), 10)
		b = append(b, '}')
	}
	b = append(b, "}\n"...)
	writeJSON(c.w, b)
	return http.StatusOK
}

// ---- audio

type speechRequest struct {
	Model          string   `json:"model"`
	Input          string   `json:"input"`
	Voice          string   `json:"voice"`
	ResponseFormat string   `json:"response_format"`
	Speed          *float64 `json:"speed"`
}

// Speech is silence, about as long as reading the input would take
// (speechCharsPerSecond, within [minSpeech, maxSpeech] seconds).
const (
	speechCharsPerSecond = 15
	minSpeechMs          = 200
	maxSpeechMs          = 4000
	pcmRate              = 24000 // OpenAI's pcm: 24 kHz, 16-bit, mono
)

var audioTypes = map[string]string{
	"mp3":  "audio/mpeg",
	"opus": "audio/opus",
	"aac":  "audio/aac",
	"flac": "audio/flac",
	"wav":  "audio/wav",
	"pcm":  "audio/pcm",
}

// mp3Frame is one silent MPEG-1 Layer III frame: 32 kbit/s, 32 kHz, mono,
// 1152 samples (36 ms); all-zero side information decodes to silence.
var mp3Frame = func() []byte {
	f := make([]byte, 144) // 144 * bitrate / sample rate
	copy(f, []byte{0xFF, 0xFB, 0x18, 0xC4})
	return f
}()

const mp3FrameMs = 36

// silence is zero bytes enough for the longest pcm answer.
var silence = make([]byte, pcmRate*2*maxSpeechMs/1000)

// speech serves POST /v1/audio/speech with a binary body.
func (s *Server) speech(c *call) int {
	var req speechRequest
	if err := json.Unmarshal(c.body, &req); err != nil {
		return c.fail(invalidRequest("", "We could not parse the JSON body of your request: "+err.Error()))
	}
	o, err := parseOverrides(c.r.Header)
	if err != nil {
		return c.fail(invalidRequest("", err.Error()))
	}
	if req.Input == "" {
		return c.fail(invalidRequest("input", "'input' is required."))
	}
	if req.Voice == "" {
		return c.fail(invalidRequest("voice", "'voice' is required."))
	}
	format := req.ResponseFormat
	if format == "" {
		format = "mp3"
	}
	ctype, ok := audioTypes[format]
	if !ok {
		return c.fail(invalidRequest("response_format", fmt.Sprintf("Invalid 'response_format': %q is not one of mp3, opus, aac, flac, wav, pcm.", format)))
	}
	speed := 1.0
	if req.Speed != nil {
		if !(*req.Speed >= 0.25 && *req.Speed <= 4) {
			return c.fail(invalidRequest("speed", "Invalid 'speed': must be from 0.25 to 4."))
		}
		speed = *req.Speed
	}
	if status := s.begin(c, req.Model, o); status != 0 {
		return status
	}

	ms := int(float64(len(req.Input)) * 1000 / speechCharsPerSecond / speed)
	ms = max(minSpeechMs, min(ms, maxSpeechMs))
	pcm := silence[:pcmRate*2*ms/1000]
	var body []byte
	switch format {
	case "mp3":
		frames := (ms + mp3FrameMs - 1) / mp3FrameMs
		body = bytes.Repeat(mp3Frame, frames)
	case "wav":
		body = append(wavHeader(len(pcm)), pcm...)
	default:
		// pcm is what it says; aac, opus and flac would need an encoder
		// for silence worth the name, and the SDKs hand audio back
		// unparsed, so they get the raw samples under their type.
		body = pcm
	}
	h := c.w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	c.w.Write(body)
	return http.StatusOK
}

// wavHeader is the 44-byte RIFF header of 16-bit mono pcmRate samples.
func wavHeader(dataLen int) []byte {
	h := make([]byte, 44, 44+dataLen)
	copy(h[0:], "RIFF")
	binary.LittleEndian.PutUint32(h[4:], uint32(36+dataLen))
	copy(h[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(h[16:], 16) // fmt chunk size
	binary.LittleEndian.PutUint16(h[20:], 1)  // PCM
	binary.LittleEndian.PutUint16(h[22:], 1)  // mono
	binary.LittleEndian.PutUint32(h[24:], pcmRate)
	binary.LittleEndian.PutUint32(h[28:], pcmRate*2) // byte rate
	binary.LittleEndian.PutUint16(h[32:], 2)         // block align
	binary.LittleEndian.PutUint16(h[34:], 16)        // bits per sample
	copy(h[36:], "data")
	binary.LittleEndian.PutUint32(h[40:], uint32(dataLen))
	return h
}

// ---- models

// modelCreated is the fixed creation time models report.
const modelCreated = 1700000000

func appendModel(b []byte, id string) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, id)
	b = append(b, `,"object":"model","created":`...)
	b = strconv.AppendInt(b, modelCreated, 10)
	return append(b, `,"owned_by":"weir-mock"}`...)
}

func modelList(names []string) []byte {
	b := []byte(`{"object":"list","data":[`)
	for i, m := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendModel(b, m)
	}
	return append(b, "]}\n"...)
}

// model serves GET /v1/models/{id}.
func (s *Server) model(w http.ResponseWriter, id string) {
	st := s.settings.Load()
	if id == "" || (st.models != nil && !st.models[id]) {
		writeError(w, apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "model_not_found",
			Message: fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", id)}, 0)
		return
	}
	writeJSON(w, append(appendModel(nil, id), '\n'))
}
