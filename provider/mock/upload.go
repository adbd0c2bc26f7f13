package mock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
)

// ---- uploads: image edits and variations, transcriptions, translations

// readForm parses a multipart work request's body (held whole: it is
// bounded by maxBody).
func readForm(c *call) (*multipart.Form, *apiError) {
	mt, params, err := mime.ParseMediaType(c.r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		e := invalidRequest("", "The request body must be multipart/form-data.")
		return nil, &e
	}
	form, err := multipart.NewReader(bytes.NewReader(c.body), params["boundary"]).ReadForm(int64(len(c.body)) + 1)
	if err != nil {
		e := invalidRequest("", "Could not parse the multipart form: "+err.Error())
		return nil, &e
	}
	return form, nil
}

func formValue(f *multipart.Form, name string) string {
	if vs := f.Value[name]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// formFile is the first file of the first of names the form has, read
// whole.
func formFile(f *multipart.Form, names ...string) (name string, data []byte, ok bool) {
	for _, n := range names {
		if fhs := f.File[n]; len(fhs) > 0 {
			r, err := fhs[0].Open()
			if err != nil {
				return "", nil, false
			}
			defer r.Close()
			data, err = io.ReadAll(r)
			return fhs[0].Filename, data, err == nil && len(data) > 0
		}
	}
	return "", nil, false
}

// imageForm reads an image upload's fields into an image request.
func imageForm(f *multipart.Form) (imageRequest, *apiError) {
	req := imageRequest{Model: formValue(f, "model"), Prompt: formValue(f, "prompt"),
		ResponseFormat: formValue(f, "response_format"), Size: formValue(f, "size"), Quality: formValue(f, "quality")}
	if n := formValue(f, "n"); n != "" {
		i, err := strconv.Atoi(n)
		if err != nil {
			e := invalidRequest("n", "Invalid 'n': must be an integer.")
			return req, &e
		}
		req.N = &i
	}
	if _, _, ok := formFile(f, "image", "image[]"); !ok {
		e := invalidRequest("image", "'image' is required: a non-empty file.")
		return req, &e
	}
	if req.Model == "" {
		req.Model = "dall-e-2" // OpenAI's default for these endpoints
	}
	return req, nil
}

// imageEdits serves POST /v1/images/edits: the same answer as a
// generation's.
func (s *Server) imageEdits(c *call) int {
	return s.imageUpload(c, true)
}

// imageVariations serves POST /v1/images/variations.
func (s *Server) imageVariations(c *call) int {
	return s.imageUpload(c, false)
}

func (s *Server) imageUpload(c *call, edit bool) int {
	form, aerr := readForm(c)
	if aerr != nil {
		return c.fail(*aerr)
	}
	req, aerr := imageForm(form)
	if aerr != nil {
		return c.fail(*aerr)
	}
	if edit && strings.TrimSpace(req.Prompt) == "" {
		return c.fail(invalidRequest("prompt", "'prompt' is required."))
	}
	o, err := parseOverrides(c.r.Header)
	if err != nil {
		return c.fail(invalidRequest("", err.Error()))
	}
	return s.answerImages(c, req, o)
}

// transcriptions serves POST /v1/audio/transcriptions, streamed as
// transcript.text.delta and transcript.text.done events when stream is
// true.
func (s *Server) transcriptions(c *call) int { return s.audioText(c, true) }

// translations serves POST /v1/audio/translations.
func (s *Server) translations(c *call) int { return s.audioText(c, false) }

// audioText answers a transcription or a translation. Its text says what
// arrived — the file's name, length and FNV-1a hash — so that a test can
// tell the upload came through whole.
func (s *Server) audioText(c *call, transcribe bool) int {
	form, aerr := readForm(c)
	if aerr != nil {
		return c.fail(*aerr)
	}
	name, data, ok := formFile(form, "file")
	if !ok {
		return c.fail(invalidRequest("file", "'file' is required: a non-empty audio file."))
	}
	stream := false
	if v := formValue(form, "stream"); v != "" && transcribe {
		var err error
		if stream, err = strconv.ParseBool(v); err != nil {
			return c.fail(invalidRequest("stream", "Invalid 'stream': must be a boolean."))
		}
	}
	format := formValue(form, "response_format")
	switch format {
	case "", "json", "text", "srt", "verbose_json", "vtt":
	default:
		return c.fail(invalidRequest("response_format", fmt.Sprintf("Invalid 'response_format': %q is not one of json, text, srt, verbose_json, vtt.", format)))
	}
	o, err := parseOverrides(c.r.Header)
	if err != nil {
		return c.fail(invalidRequest("", err.Error()))
	}
	if status := s.begin(c, formValue(form, "model"), o); status != 0 {
		return status
	}
	h := fnv.New64a()
	h.Write(data)
	text := fmt.Sprintf("mock transcript of %s: %d bytes, fnv %016x", name, len(data), h.Sum64())
	in, out := estimateTokens(len(data)/16), estimateTokens(len(text))
	if stream {
		return writeTranscriptStream(c, text, in, out)
	}
	return writeTranscript(c, format, text, in, out)
}

type transcriptUsage struct {
	Type         string `json:"type"`
	InputTokens  int    `json:"input_tokens"`
	OutputTokens int    `json:"output_tokens"`
	TotalTokens  int    `json:"total_tokens"`
}

func writeTranscript(c *call, format, text string, in, out int) int {
	switch format {
	case "text":
		c.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(c.w, text+"\n")
	case "srt":
		c.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(c.w, "1\n00:00:00,000 --> 00:00:01,000\n"+text+"\n\n")
	case "vtt":
		c.w.Header().Set("Content-Type", "text/vtt; charset=utf-8")
		io.WriteString(c.w, "WEBVTT\n\n00:00:00.000 --> 00:00:01.000\n"+text+"\n\n")
	case "verbose_json":
		b, _ := json.Marshal(map[string]any{"task": "transcribe", "language": "english", "duration": 1.0, "text": text,
			"segments": []any{}, "usage": map[string]any{"type": "duration", "seconds": 1}}) // plain values: cannot fail
		writeJSON(c.w, append(b, '\n'))
	default:
		b, _ := json.Marshal(map[string]any{"text": text, "usage": transcriptUsage{"tokens", in, out, in + out}})
		writeJSON(c.w, append(b, '\n'))
	}
	return http.StatusOK
}

// writeTranscriptStream sends text a word a delta, then the done event
// with the usage, as OpenAI streams a transcription.
func writeTranscriptStream(c *call, text string, in, out int) int {
	var b []byte
	send := beginEvents(c, &b)
	words := strings.SplitAfter(text, " ")
	for _, w := range words {
		ev, _ := json.Marshal(map[string]string{"type": "transcript.text.delta", "delta": w})
		b = append(append(append(b, "data: "...), ev...), "\n\n"...)
		if !send() {
			return statusClientClosed
		}
	}
	ev, _ := json.Marshal(map[string]any{"type": "transcript.text.done", "text": text,
		"usage": transcriptUsage{"tokens", in, out, in + out}})
	b = append(append(append(b, "data: "...), ev...), "\n\n"...)
	if !send() {
		return statusClientClosed
	}
	return http.StatusOK
}
