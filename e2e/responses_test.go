package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/weir-gateway/weir/provider/mock"
)

// TestResponsesBoundAcrossRestart: `weir serve` passes a Responses
// request through to an openai platform, binds the response it keeps to
// that platform and key in its database, and after a restart still
// continues, retrieves and deletes it there for that key alone.
func TestResponsesBoundAcrossRestart(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{CompletionTokens: 5})
	g := startGateway(t, "", allKinds(up.URL))
	_, key := g.createKey(t)
	_, other := g.createKey(t)

	rep := g.do(t, request{Path: "/v1/responses", Key: key, Body: `{"model":"chat","input":"Say hello"}`})
	var r struct {
		ID     string `json:"id"`
		Object string `json:"object"`
		Store  bool   `json:"store"`
	}
	decodeOK(t, rep, &r)
	if !strings.HasPrefix(r.ID, "resp_") || r.Object != "response" || !r.Store {
		t.Fatalf("response %s", rep.Body)
	}

	g.kill9(t)
	g, _ = g.restart(t)

	rep = g.do(t, request{Path: "/v1/responses", Key: key, Body: `{"model":"chat","input":"And then?","previous_response_id":"` + r.ID + `"}`})
	var next struct {
		PreviousResponseID string `json:"previous_response_id"`
	}
	decodeOK(t, rep, &next)
	if next.PreviousResponseID != r.ID {
		t.Errorf("continued: %s", rep.Body)
	}
	for _, tc := range []struct {
		method, key string
		status      int
	}{
		{http.MethodGet, other, http.StatusNotFound},
		{http.MethodGet, key, http.StatusOK},
		{http.MethodDelete, other, http.StatusNotFound},
		{http.MethodDelete, key, http.StatusOK},
		{http.MethodGet, key, http.StatusNotFound},
	} {
		rep := g.do(t, request{Method: tc.method, Path: "/v1/responses/" + r.ID, Key: tc.key})
		if rep.Status != tc.status {
			t.Errorf("%s as %s: %d %s", tc.method, map[bool]string{true: "its key", false: "another key"}[tc.key == key], rep.Status, rep.Body)
		}
		if tc.status == http.StatusOK && tc.method == http.MethodGet {
			var got struct{ ID string }
			if json.Unmarshal(rep.Body, &got) != nil || got.ID != r.ID {
				t.Errorf("GET: %s", rep.Body)
			}
		}
	}
}
