package httpapi

import (
	"bytes"
	"io"
	"mime"
	"mime/multipart"
	"testing"
)

// TestUploadReencodes: the form an upload sends upstream has its model
// rewritten, its other fields and its files (one spooled to disk) as they
// came, and exactly the length it declares; each attempt gets it anew.
func TestUploadReencodes(t *testing.T) {
	t.Parallel()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("model", "stt")
	_ = mw.WriteField("language", "fr")
	_ = mw.WriteField("user", "end-user-1")
	big := bytes.Repeat([]byte{1, 2, 3}, uploadMemory) // past what is held in memory
	fw, _ := mw.CreateFormFile("file", "big.wav")
	_, _ = fw.Write(big)
	_ = mw.Close()
	form, err := multipart.NewReader(&body, mw.Boundary()).ReadForm(uploadMemory)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = form.RemoveAll() })
	u, aerr := decodeUpload(epTranscriptions, form)
	if aerr != nil {
		t.Fatal(aerr)
	}
	if u.model != "stt" || u.endUser != "end-user-1" || u.wants.FileBytes != int64(len(big)) {
		t.Fatalf("model %q, end user %q, file bytes %d", u.model, u.endUser, u.wants.FileBytes)
	}
	for attempt := range 2 {
		up, err := u.Upload("whisper-1")
		if err != nil {
			t.Fatal(err)
		}
		sent, err := io.ReadAll(up.Body)
		_ = up.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(sent)) != up.Length {
			t.Fatalf("attempt %d: sent %d bytes, declared %d", attempt, len(sent), up.Length)
		}
		_, params, _ := mime.ParseMediaType(up.ContentType)
		got, err := multipart.NewReader(bytes.NewReader(sent), params["boundary"]).ReadForm(int64(len(sent)))
		if err != nil {
			t.Fatal(err)
		}
		if got.Value["model"][0] != "whisper-1" || got.Value["language"][0] != "fr" {
			t.Fatalf("attempt %d: fields %v", attempt, got.Value)
		}
		f, _ := got.File["file"][0].Open()
		data, _ := io.ReadAll(f)
		if !bytes.Equal(data, big) || got.File["file"][0].Filename != "big.wav" {
			t.Fatalf("attempt %d: file %q of %d bytes, want big.wav of %d", attempt, got.File["file"][0].Filename, len(data), len(big))
		}
	}
}
