package provider

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"sort"
	"strings"

	"github.com/weir-gateway/weir/openaiwire"
)

// TaskFile is a file in a task's JSON input, where the endpoint its
// model serves takes a multipart upload (a transcription's audio): the
// file's bytes base64-encoded, its name and type.
type TaskFile struct {
	Data        string `json:"data"`
	Filename    string `json:"filename"`
	ContentType string `json:"content_type"`
}

// TaskFileField is the input field that holds the file.
const TaskFileField = "file"

// ReadTaskFile reads raw, an input's file: it must be an object with
// data, standard base64; it returns the file and its bytes, decoded. The
// error is for the client, about input.file.
func ReadTaskFile(raw json.RawMessage) (TaskFile, []byte, error) {
	var f TaskFile
	if err := json.Unmarshal(raw, &f); err != nil {
		return f, nil, errors.New(`file must be an object: {"data": base64 of the file, "filename": its name}`)
	}
	if f.Data == "" {
		return f, nil, errors.New("file.data must hold the file, base64-encoded")
	}
	data, err := base64.StdEncoding.DecodeString(f.Data)
	if err != nil {
		return f, nil, errors.New("file.data is not valid base64: " + err.Error())
	}
	return f, data, nil
}

// taskForm is a task's JSON input sent as the multipart form an upload
// endpoint takes: its file (TaskFileField) the file part, its other
// fields text fields — strings as they are, numbers and booleans as
// written, an array as repeated "name[]" fields as OpenAI's SDKs send
// them, an object as its JSON. The form's model is the body's.
func taskForm(body []byte) (*Upload, error) {
	var in map[string]json.RawMessage
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, badTaskInput("", "the task's input is not a JSON object")
	}
	f, data, err := ReadTaskFile(in[TaskFileField])
	if err != nil {
		return nil, badTaskInput(TaskFileField, err.Error())
	}
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	names := make([]string, 0, len(in))
	for name := range in {
		names = append(names, name)
	}
	sort.Strings(names)
	var model string
	for _, name := range names {
		if name == TaskFileField {
			continue
		}
		if err := writeTaskField(mw, name, in[name]); err != nil {
			return nil, badTaskInput(name, err.Error())
		}
		if name == "model" {
			_ = json.Unmarshal(in[name], &model)
		}
	}
	h := make(textproto.MIMEHeader)
	filename := f.Filename
	if filename == "" {
		filename = "file"
	}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, strings.ReplaceAll(filename, `"`, "")))
	ct := f.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	pw, err := mw.CreatePart(h)
	if err == nil {
		_, err = pw.Write(data)
	}
	if err == nil {
		err = mw.Close()
	}
	if err != nil {
		return nil, err
	}
	return &Upload{Body: io.NopCloser(&b), ContentType: mw.FormDataContentType(), Length: int64(b.Len()), Model: model}, nil
}

// writeTaskField writes one input field as form fields.
func writeTaskField(mw *multipart.Writer, name string, raw json.RawMessage) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return mw.WriteField(name, x)
	case []any:
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				b, _ := json.Marshal(e) // decoded JSON: cannot fail
				s = string(b)
			}
			if err := mw.WriteField(name+"[]", s); err != nil {
				return err
			}
		}
		return nil
	default:
		return mw.WriteField(name, strings.TrimSpace(string(raw)))
	}
}

// badTaskInput is a 400 about a task input's field.
func badTaskInput(param, msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Body: openaiwire.ErrorJSON(openaiwire.TypeInvalidRequest, msg, param, "")}
}
