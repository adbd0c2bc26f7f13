package mock

import (
	"encoding/json"
	"net/http"
	"strings"
)

// Azure OpenAI: /openai/deployments/{deployment}/{chat/completions,
// embeddings, images/generations, images/edits, audio/speech,
// audio/transcriptions, audio/translations}?api-version=..., the key
// in api-key (or a bearer token), answered by the OpenAI endpoints with
// the deployment as the model. Azure's own refusals come first: no
// api-version is 404 "Resource not found", no key 401, a deployment the
// model list lacks 404 DeploymentNotFound, and X-Mock-Content-Filter: 1
// the 400 content_filter its filter answers a prompt with.

// azureRoute reads an Azure path: the deployment and the endpoint.
func azureRoute(p string) (deployment, endpoint string, ok bool) {
	rest, ok := strings.CutPrefix(p, "/openai/deployments/")
	if !ok {
		return "", "", false
	}
	deployment, endpoint, ok = strings.Cut(rest, "/")
	return deployment, endpoint, ok && deployment != ""
}

// azureError writes Azure's own error shape: {"error": {"code",
// "message"}}, the code a string.
func azureError(w http.ResponseWriter, status int, code, message string) {
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	body.Error.Code, body.Error.Message = code, message
	b, _ := json.Marshal(body) // strings: cannot fail
	writeErrorBody(w, status, append(b, '\n'), 0)
}

// azureContentFilter is what Azure answers a prompt its filter stopped.
const azureContentFilter = `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry.","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"hate":{"filtered":false,"severity":"safe"},"jailbreak":{"filtered":false,"detected":false},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":true,"severity":"medium"}}}}}` + "\n"

func (s *Server) serveAzure(w http.ResponseWriter, r *http.Request, deployment, endpoint string) {
	var h handler
	switch endpoint {
	case "chat/completions":
		h = s.chat
	case "embeddings":
		h = s.embeddings
	case "images/generations":
		h = s.images
	case "audio/speech":
		h = s.speech
	case "images/edits":
		h = s.imageEdits
	case "audio/transcriptions":
		h = s.transcriptions
	case "audio/translations":
		h = s.translations
	}
	if h == nil || r.URL.Query().Get("api-version") == "" {
		azureError(w, http.StatusNotFound, "404", "Resource not found")
		return
	}
	if r.Header.Get("Api-Key") == "" && !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		azureError(w, http.StatusUnauthorized, "401", "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.")
		return
	}
	if st := s.settings.Load(); st.models != nil && !st.models[deployment] {
		azureError(w, http.StatusNotFound, "DeploymentNotFound", "The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again.")
		return
	}
	s.work(w, r, func(c *call) int {
		if c.r.Header.Get("X-Mock-Content-Filter") == "1" {
			writeErrorBody(c.w, http.StatusBadRequest, []byte(azureContentFilter), 0)
			return http.StatusBadRequest
		}
		// The deployment is the model, whatever the body says (a form's
		// model Weir writes as the deployment).
		var body map[string]json.RawMessage
		if json.Unmarshal(c.body, &body) == nil && body != nil {
			body["model"], _ = json.Marshal(deployment) // a string: cannot fail
			c.body, _ = json.Marshal(body)              // decoded JSON: cannot fail
		}
		return h(c)
	})
}

// azureV1 is Azure's v1 API, OpenAI's paths under it and the deployment
// as the body's model, with no api-version: where Azure serves the
// Responses API.
const azureV1 = "/openai/v1"

// serveAzureV1 serves Azure's v1 API: the Responses API, whole and
// stored.
func (s *Server) serveAzureV1(w http.ResponseWriter, r *http.Request, rest string) {
	if r.Header.Get("Api-Key") == "" && !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		azureError(w, http.StatusUnauthorized, "401", "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.")
		return
	}
	switch {
	case rest == "/responses":
		s.work(w, r, s.createResponse)
	case strings.HasPrefix(rest, "/responses/"):
		s.serveStoredResponse(w, r, strings.TrimPrefix(rest, "/responses/"))
	default:
		azureError(w, http.StatusNotFound, "404", "Resource not found")
	}
}
