package httpapi

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/provider"
)

// The endpoints whose requests are multipart forms with files (OpenAI's
// shapes): their files go upstream as they came, the form re-encoded
// with the model rewritten.
var (
	epImageEdits      = endpoint{name: "image_edits", path: "/images/edits", kind: weir.KindImages, required: []string{"prompt"}}
	epImageVariations = endpoint{name: "image_variations", path: "/images/variations", kind: weir.KindImages}
	epTranscriptions  = endpoint{name: "transcriptions", path: "/audio/transcriptions", kind: weir.KindTranscription}
	epTranslations    = endpoint{name: "translations", path: "/audio/translations", kind: weir.KindTranscription}
)

// uploadFiles are the file fields of each upload endpoint: the first
// names the one it requires (image[] stands for image, as OpenAI's SDKs
// send several), the others it may have.
var uploadFiles = map[string][]string{
	epImageEdits.name:      {"image", "image[]", "mask"},
	epImageVariations.name: {"image"},
	epTranscriptions.name:  {"file"},
	epTranslations.name:    {"file"},
}

// uploadMemory is how much of an upload's files is held in memory; the
// rest of the form's files is spooled to temporary files on disk (removed
// when the request ends), so a waiting upload holds at most this much of
// its files, whatever their size. The text fields are held in memory
// (bounded by MaxUploadBytes).
const uploadMemory = 64 << 10

// upload serves one multipart endpoint: it reads the form (files past
// uploadMemory to disk), checks it, and has the gateway serve it as any
// request, the form sent to each attempt's upstream anew.
func (s *Server) upload(ep endpoint) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.deps.Clock.Now()
		c, form, err := s.prepareUpload(w, r, ep)
		if form != nil {
			defer func() { _ = form.RemoveAll() }()
		}
		if err != nil {
			s.deps.Metrics.ObserveHTTP(ep.name, s.writeErr(w, r, err), s.deps.Clock.Now().Sub(start))
			return
		}
		s.serve(w, r, ep, c, &c.out, start)
	})
}

// prepareUpload is prepare for an upload: the key, the form read whole
// (its files spooled), its fields checked, and the gateway's decision.
// The form, if one was read, is the caller's to remove.
func (s *Server) prepareUpload(w http.ResponseWriter, r *http.Request, ep endpoint) (*call, *multipart.Form, error) {
	key, err := s.authenticate(w, r)
	if err != nil {
		return nil, nil, err
	}
	form, aerr := s.readUpload(w, r)
	if aerr != nil {
		return nil, form, aerr
	}
	u, aerr := decodeUpload(ep, form)
	if aerr != nil {
		return nil, form, aerr
	}
	ask, aerr := askOf(r)
	if aerr != nil {
		return nil, form, aerr
	}
	ask.Model, ask.Kind, ask.DefaultMaxWait = u.model, ep.kind, s.cfg.DefaultMaxWait
	g, err := s.deps.Gateway.Prepare(r.Context(), key, ask)
	if err != nil {
		return nil, form, err
	}
	ri := infoOf(w)
	c := &call{Call: gateway.Call{
		RequestID: ri.id, ClientRequestID: ri.clientID, Grant: g,
		Path: ep.path, Body: u, Stream: u.wants.Stream, Tokens: u.estimate, Wants: u.wants, Header: r.Header,
	}}
	c.Usage = weir.Usage{RequestID: ri.id, KeyID: key.ID, Group: g.Group, Model: g.Model.Name, Endpoint: ep.name, EndUser: u.endUser}
	return c, form, nil
}

// readUpload reads r's multipart form, bounded by MaxUploadBytes: one
// declared larger is refused before anything is read.
func (s *Server) readUpload(w http.ResponseWriter, r *http.Request) (*multipart.Form, *apiError) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return nil, errorf(weir.CodeInvalidRequest, "", "the request body must be multipart/form-data (with a boundary)")
	}
	if r.ContentLength > s.cfg.MaxUploadBytes {
		return nil, s.uploadTooLarge()
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxUploadBytes)
	form, err := multipart.NewReader(r.Body, params["boundary"]).ReadForm(uploadMemory)
	var mb *http.MaxBytesError
	switch {
	case err == nil:
		return form, nil
	case errors.As(err, &mb):
		return nil, s.uploadTooLarge()
	case errors.Is(err, multipart.ErrMessageTooLarge):
		return nil, errorf(weir.CodePayloadTooLarge, "", "the form has too many parts or too large fields")
	case bodyTimedOut(err):
		return nil, s.bodyError(err, "")
	}
	return nil, errorf(weir.CodeInvalidRequest, "", "could not read the multipart form: "+err.Error())
}

func (s *Server) uploadTooLarge() *apiError {
	return errorf(weir.CodePayloadTooLarge, "", fmt.Sprintf("the upload is larger than %d bytes (server.max_upload_bytes)", s.cfg.MaxUploadBytes))
}

// uploadBody is a decoded upload: its form, and what Weir reads of it.
// It is a gateway.Uploader: each attempt streams the form to the
// upstream anew from the spooled files.
type uploadBody struct {
	form     *multipart.Form
	model    string
	endUser  string
	wants    weir.Wants
	estimate int64
	// boundary is the re-encoded form's, the same for every attempt.
	boundary string
}

var _ gateway.Uploader = (*uploadBody)(nil)

// decodeUpload checks an upload's form for ep: one model, the file it
// requires, its text fields as the JSON endpoints check them.
func decodeUpload(ep endpoint, form *multipart.Form) (*uploadBody, *apiError) {
	u := &uploadBody{form: form, boundary: multipart.NewWriter(io.Discard).Boundary()}
	models := form.Value["model"]
	switch {
	case len(models) == 0 || models[0] == "":
		return nil, errorf(weir.CodeInvalidRequest, "model", "you must provide a model parameter")
	case len(models) > 1:
		return nil, errorf(weir.CodeInvalidRequest, "model", "model must be given once")
	case len(models[0]) > maxModelName:
		return nil, errorf(weir.CodeInvalidRequest, "model", fmt.Sprintf("model is %d bytes long; at most %d are allowed", len(models[0]), maxModelName))
	}
	u.model = models[0]
	files := uploadFiles[ep.name]
	for name := range form.File {
		if !slices.Contains(files, name) {
			return nil, errorf(weir.CodeInvalidRequest, name, fmt.Sprintf("unexpected file field %q: want %s", name, strings.Join(files, ", ")))
		}
	}
	if len(form.File[files[0]]) == 0 && (files[0] != "image" || len(form.File["image[]"]) == 0) {
		return nil, errorf(weir.CodeInvalidRequest, files[0], "missing required parameter: "+files[0])
	}
	for _, name := range ep.required {
		if strings.TrimSpace(first(form.Value[name])) == "" {
			return nil, errorf(weir.CodeInvalidRequest, name, "missing required parameter: "+name)
		}
	}
	for _, fhs := range form.File {
		for _, fh := range fhs {
			u.wants.FileBytes = max(u.wants.FileBytes, fh.Size)
		}
	}
	if aerr := u.readFields(ep); aerr != nil {
		return nil, aerr
	}
	var aerr *apiError
	if u.endUser, aerr = endUserOf(first(form.Value["safety_identifier"]), first(form.Value["user"])); aerr != nil {
		return nil, aerr
	}
	// The text's four bytes a token; what the files are worth the
	// upstream reports.
	for _, vs := range form.Value {
		for _, v := range vs {
			u.estimate += int64(len(v))
		}
	}
	u.estimate = u.estimate/4 + 1
	u.wants.PromptTokens = u.estimate
	return u, nil
}

// readFields reads what choosing a candidate needs of the form's text
// fields: size, n, response_format and stream.
func (u *uploadBody) readFields(ep endpoint) *apiError {
	v := u.form.Value
	u.wants.Size, u.wants.ResponseFormat = first(v["size"]), first(v["response_format"])
	if n := first(v["n"]); n != "" {
		i, err := strconv.ParseInt(n, 10, 64)
		if err != nil || i < 1 {
			return errorf(weir.CodeInvalidRequest, "n", "n must be a positive integer")
		}
		u.wants.N = i
	}
	if st := first(v["stream"]); st != "" {
		stream, err := strconv.ParseBool(st)
		switch {
		case err != nil:
			return errorf(weir.CodeInvalidRequest, "stream", "stream must be a boolean")
		case stream && ep.name != epTranscriptions.name && ep.name != epImageEdits.name:
			return errorf(weir.CodeInvalidRequest, "stream", "stream is only supported for transcriptions and image edits")
		}
		u.wants.Stream = stream
	}
	return nil
}

// first is vs's first value, or "".
func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// WithModel implements gateway.Body: an upload has no JSON body (the
// gateway sends it through Upload).
func (u *uploadBody) WithModel(string) ([]byte, error) {
	return nil, errors.New("an upload is sent as a form, not JSON")
}

// Upload implements gateway.Uploader: the form, its model replaced by
// upstream, written into a pipe as the upstream reads it, its files
// read from where the form spooled them. Its length is known beforehand
// (the form's parts and its files' sizes), so it goes with a
// Content-Length.
func (u *uploadBody) Upload(upstream string) (*provider.Upload, error) {
	var n countWriter
	if err := u.encode(&n, upstream, func(w io.Writer, fh *multipart.FileHeader) error {
		n += countWriter(fh.Size)
		return nil
	}); err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(u.encode(pw, upstream, copyFile))
	}()
	return &provider.Upload{Body: pr, ContentType: "multipart/form-data; boundary=" + u.boundary, Length: int64(n), Model: upstream}, nil
}

// encode writes the form to w: its text fields by name (model as
// upstream), then its files, each copied by put.
func (u *uploadBody) encode(w io.Writer, upstream string, put func(io.Writer, *multipart.FileHeader) error) error {
	mw := multipart.NewWriter(w)
	if err := mw.SetBoundary(u.boundary); err != nil {
		return err
	}
	for _, name := range sortedKeys(u.form.Value) {
		for _, v := range u.form.Value[name] {
			if name == "model" {
				v = upstream
			}
			if err := mw.WriteField(name, v); err != nil {
				return err
			}
		}
	}
	for _, name := range sortedKeys(u.form.File) {
		for _, fh := range u.form.File[name] {
			h := make(textproto.MIMEHeader, 2)
			h.Set("Content-Disposition", multipart.FileContentDisposition(name, fh.Filename))
			ct := fh.Header.Get("Content-Type")
			if ct == "" {
				ct = "application/octet-stream"
			}
			h.Set("Content-Type", ct)
			pw, err := mw.CreatePart(h)
			if err != nil {
				return err
			}
			if err := put(pw, fh); err != nil {
				return err
			}
		}
	}
	return mw.Close()
}

// copyFile copies fh's content, from memory or its spool file, to w.
func copyFile(w io.Writer, fh *multipart.FileHeader) error {
	f, err := fh.Open()
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// countWriter counts what is written to it.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
