package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/openaiwire"
)

// Azure is the adapter for Azure OpenAI: OpenAI's API behind deployment
// URLs. The platform model's upstream name is the deployment; a call to
// {path} goes to {base}/openai/deployments/{deployment}{path}
// ?api-version={version} with the key in the api-key header (or, signed
// in with Microsoft Entra ID, a bearer token), and its
// answer passes through as OpenAI's does. It serves chat, embeddings,
// images (generations and edits), speech, transcriptions and
// translations (the uploads' forms sent as they are read, the deployment
// the form's model), and the Responses API (/responses and what follows
// a response, /responses/{id}...), which Azure serves only on its v1 API:
// {base}/openai/v1/responses, the deployment as the body's model, no
// api-version.
type Azure struct {
	BaseURL string // e.g. https://my-resource.openai.azure.com
	APIKey  string // sent as api-key
	// Entra, when set, signs the platform in with Microsoft Entra ID: its
	// access token is sent as Authorization: Bearer instead of api-key.
	Entra *EntraTokens
	// APIVersion is the api-version every call names; "":
	// DefaultAzureAPIVersion.
	APIVersion string
	Client     *http.Client
	// Timeout, IdleTimeout, CallTimeout and AbortGrace bound each call as
	// OpenAI's do.
	Timeout     time.Duration
	IdleTimeout time.Duration
	CallTimeout time.Duration
	AbortGrace  time.Duration
	Clock       clock.Clock
}

// DefaultAzureAPIVersion is the api-version an azure platform sends
// unless its config names another: the latest generally available one of
// Azure OpenAI's inference API.
const DefaultAzureAPIVersion = "2024-10-21"

var _ Adapter = (*Azure)(nil)

// azurePaths are the calls Azure serves by deployment.
var azurePaths = []string{"/chat/completions", "/embeddings", "/images/generations", "/audio/speech",
	"/images/edits", "/audio/transcriptions", "/audio/translations"}

// Do sends c to the deployment its body's model names.
func (a *Azure) Do(ctx context.Context, c Call) (*http.Response, error) {
	if c.Path == "/responses" || strings.HasPrefix(c.Path, "/responses/") {
		return a.do(ctx, c, azureV1+c.Path)
	}
	if !slices.Contains(azurePaths, c.Path) {
		msg := fmt.Sprintf("this model's azure platform serves %s, not %s", strings.Join(azurePaths, ", "), c.Path)
		return nil, &Error{Status: http.StatusBadRequest, Body: openaiwire.ErrorJSON(openaiwire.TypeInvalidRequest, msg, "model", "unsupported_endpoint")}
	}
	deployment, err := deploymentOf(c)
	if err != nil {
		return nil, err
	}
	version := a.APIVersion
	if version == "" {
		version = DefaultAzureAPIVersion
	}
	return a.do(ctx, c, "/openai/deployments/"+url.PathEscape(deployment)+c.Path+"?api-version="+url.QueryEscape(version))
}

// deploymentOf is the deployment c goes to: its body's model, or its
// upload's.
func deploymentOf(c Call) (string, error) {
	if c.Upload != nil {
		if c.Upload.Model != "" {
			return c.Upload.Model, nil
		}
	} else {
		var body struct {
			Model string `json:"model"`
		}
		if err := json.Unmarshal(c.Body, &body); err == nil && body.Model != "" {
			return body.Model, nil
		}
	}
	return "", &Error{Status: http.StatusBadRequest, Body: openaiwire.ErrorJSON(openaiwire.TypeInvalidRequest, "the request names no model (the deployment)", "model", "")}
}

// azureV1 is the path of Azure's v1 API, OpenAI's paths under it.
const azureV1 = "/openai/v1"

// do sends c to path under the base URL.
func (a *Azure) do(ctx context.Context, c Call, path string) (*http.Response, error) {
	h := make(http.Header, 4)
	setPassedOn(h, &c)
	secret := a.APIKey
	switch {
	case a.Entra != nil:
		tok, err := a.Entra.token(ctx)
		if err != nil {
			return nil, err
		}
		secret = tok
		h.Set("Authorization", "Bearer "+tok)
	case a.APIKey != "":
		h.Set("Api-Key", a.APIKey)
	}
	opts := callOpts{
		client: a.Client,
		clock:  a.Clock,
		bounds: Bounds{Header: a.Timeout, Idle: a.IdleTimeout, Total: a.CallTimeout},
		grace:  a.AbortGrace,
	}
	resp, err := opts.do(ctx, a.BaseURL, path, c, h)
	if err != nil {
		return nil, err
	}
	resp, err = checkStatus(resp, secret)
	if pe, ok := err.(*Error); ok && pe.Status == http.StatusBadRequest {
		if b, ok := contentFiltered(pe.Body, c.Path); ok {
			pe.Body = b
		}
	}
	return resp, err
}

// contentFiltered rewrites Azure's refusal of a prompt its content filter
// stopped (400, code content_filter) as a clear client error in OpenAI's
// shape: which categories stopped it, and the parameter that holds the
// prompt.
func contentFiltered(body []byte, path string) ([]byte, bool) {
	var e struct {
		Error struct {
			Code       string `json:"code"`
			InnerError struct {
				Result map[string]struct {
					Filtered bool   `json:"filtered"`
					Severity string `json:"severity"`
					Detected *bool  `json:"detected"`
				} `json:"content_filter_result"`
			} `json:"innererror"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error.Code != "content_filter" {
		return nil, false
	}
	var why []string
	for cat, r := range e.Error.InnerError.Result {
		if !r.Filtered {
			continue
		}
		if r.Severity != "" {
			cat += ": " + r.Severity
		}
		why = append(why, cat)
	}
	slices.Sort(why)
	msg := "Azure OpenAI's content filter refused the prompt"
	if len(why) > 0 {
		msg += " (" + strings.Join(why, ", ") + ")"
	}
	msg += "; change the prompt and try again."
	param := "input"
	switch path {
	case "/chat/completions":
		param = "messages"
	case "/images/generations":
		param = "prompt"
	}
	return openaiwire.ErrorJSON(openaiwire.TypeInvalidRequest, msg, param, "content_filter"), true
}
