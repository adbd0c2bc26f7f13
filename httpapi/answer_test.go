package httpapi

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/gateway"
)

// A whole answer reaches its client, with its length, before the
// end-of-request work: here the usage record waits until the client has
// read the answer, and is still made.
func TestWholeAnswerBeforeItsRecord(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", chatJSON},
		{"messages", "/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
		{"responses", "/v1/responses", `{"model":"m","input":"hi"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			answered := make(chan struct{})
			recorded := make(chan weir.Usage, 1)
			b := setup(t, setupOpts{translateResponses: true, deps: func(d *Deps) {
				d.Usage = func(u weir.Usage) {
					<-answered
					recorded <- u
				}
			}})
			// A bound for a failing test: an answer held until its handler
			// returns never comes, as the record waits for it.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.http.URL+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+b.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				close(answered)
				t.Fatalf("no answer before the usage record: %v", err)
			}
			out, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			close(answered)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, %v: %s", resp.StatusCode, err, out)
			}
			if n := resp.Header.Get("Content-Length"); n != strconv.Itoa(len(out)) || resp.TransferEncoding != nil {
				t.Errorf("Content-Length %q, Transfer-Encoding %v; want the length of the %d bytes read", n, resp.TransferEncoding, len(out))
			}
			select {
			case u := <-recorded:
				if u.Outcome != string(gateway.OutcomeOK) || u.Status != http.StatusOK || u.CompletionTokens == 0 {
					t.Errorf("usage record %+v", u)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("no usage record")
			}
		})
	}
}

// The work after a whole answer is done when its client hangs up at
// once, and the server's Shutdown, begun meanwhile, waits for it.
func TestWorkAfterTheAnswerDrained(t *testing.T) {
	t.Parallel()
	shutdown := make(chan struct{})
	recorded := make(chan weir.Usage, 1)
	b := setup(t, setupOpts{deps: func(d *Deps) {
		d.Usage = func(u weir.Usage) {
			<-shutdown // the client has gone, and Shutdown has begun
			recorded <- u
		}
	}})
	b.http.Config.RegisterOnShutdown(func() { close(shutdown) })
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.http.URL+"/v1/chat/completions", strings.NewReader(chatJSON))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+b.key)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close() // and the connection with it
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, %v: %s", resp.StatusCode, err, out)
	}
	if err := b.http.Config.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case u := <-recorded:
		if u.Outcome != string(gateway.OutcomeOK) || u.Status != http.StatusOK {
			t.Errorf("usage record %+v", u)
		}
	default:
		t.Fatal("Shutdown returned before the request's usage record was made")
	}
}
