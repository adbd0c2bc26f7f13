package provider

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/weir-gateway/weir/clock"
)

// Platform is what the adapters of one platform are made from, whatever
// its kind (weir.Platform.Kind).
type Platform struct {
	Kind    string
	BaseURL string
	APIKey  string
	Client  *http.Client
	// Timeout, IdleTimeout and CallTimeout bound each call (Bounds).
	Timeout     time.Duration
	IdleTimeout time.Duration
	CallTimeout time.Duration
	// APIVersion is an azure platform's api-version ("": the default).
	APIVersion string
	Clock      clock.Clock
	// Region, AccessKeyID, SecretAccessKey and SessionToken are a bedrock
	// platform's (BedrockConfig); APIKey is its Bedrock API key.
	Region                                     string
	AccessKeyID, SecretAccessKey, SessionToken string
	// TenantID, ClientID, ClientSecret and TokenURL sign an azure
	// platform in with Microsoft Entra ID (EntraConfig) when TenantID is
	// set; APIKey is then unused.
	TenantID, ClientID, ClientSecret, TokenURL string
}

// Adapters are a platform's adapters: Sync for the calls answered at
// once (chat, embeddings, images, speech), Async for long-running jobs
// (video); nil where the kind has none.
type Adapters struct {
	Sync  Adapter
	Async AsyncAdapter
}

// New returns the adapters of p's kind. Every kind takes Chat Completions
// (and the other OpenAI-shaped calls it serves) and answers in OpenAI's
// shapes, translating to and from its own protocol, so that what the
// gateway reads of an answer (usage, errors) is the same whatever the
// kind.
func New(p Platform) (Adapters, error) {
	switch p.Kind {
	case "", "openai":
		return Adapters{
			Sync: &OpenAI{BaseURL: p.BaseURL, APIKey: p.APIKey, Client: p.Client,
				Timeout: p.Timeout, IdleTimeout: p.IdleTimeout, CallTimeout: p.CallTimeout, Clock: p.Clock},
			Async: &OpenAIVideo{BaseURL: p.BaseURL, APIKey: p.APIKey, Client: p.Client,
				Timeout: p.Timeout, IdleTimeout: p.IdleTimeout, CallTimeout: p.CallTimeout, Clock: p.Clock},
		}, nil
	case "gemini":
		return Adapters{Sync: &Gemini{BaseURL: p.BaseURL, APIKey: p.APIKey, Client: p.Client,
			Timeout: p.Timeout, IdleTimeout: p.IdleTimeout, CallTimeout: p.CallTimeout, Clock: p.Clock}}, nil
	case "azure":
		a := &Azure{BaseURL: p.BaseURL, APIKey: p.APIKey, APIVersion: p.APIVersion, Client: p.Client,
			Timeout: p.Timeout, IdleTimeout: p.IdleTimeout, CallTimeout: p.CallTimeout, Clock: p.Clock}
		if p.TenantID != "" {
			a.APIKey = ""
			a.Entra = NewEntraTokens(EntraConfig{TenantID: p.TenantID, ClientID: p.ClientID, ClientSecret: p.ClientSecret,
				TokenURL: p.TokenURL, Client: p.Client})
		}
		return Adapters{Sync: a}, nil
	case "anthropic":
		return Adapters{Sync: &Anthropic{BaseURL: p.BaseURL, APIKey: p.APIKey, Client: p.Client,
			Timeout: p.Timeout, IdleTimeout: p.IdleTimeout, CallTimeout: p.CallTimeout, Clock: p.Clock}}, nil
	case "bedrock":
		b, err := NewBedrock(context.Background(), BedrockConfig{Region: p.Region, BaseURL: p.BaseURL,
			AccessKeyID: p.AccessKeyID, SecretAccessKey: p.SecretAccessKey, SessionToken: p.SessionToken, APIKey: p.APIKey,
			Client: p.Client, Timeout: p.Timeout, IdleTimeout: p.IdleTimeout, CallTimeout: p.CallTimeout, Clock: p.Clock})
		if err != nil {
			return Adapters{}, err
		}
		return Adapters{Sync: b}, nil
	}
	return Adapters{}, fmt.Errorf("provider: unknown platform kind %q", p.Kind)
}
