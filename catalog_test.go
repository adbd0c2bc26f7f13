package weir_test

import (
	"errors"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// Catalog.Validate names the field of the first problem by its path, as
// the config file writes it, whoever built the catalog; Limits.Validate
// names the limit. Both match ErrInvalid.
func TestValidatePaths(t *testing.T) {
	t.Parallel()
	valid := func() weir.Catalog {
		return weir.Catalog{
			Platforms:      []weir.Platform{{Name: "p", Kind: "openai", BaseURL: "https://api.example.com/v1"}},
			PlatformModels: []weir.PlatformModel{{Name: "p/m", Platform: "p", Upstream: "m"}},
			Models:         []weir.Model{{Name: "m", Kind: weir.KindChat, Candidates: []weir.Candidate{{PlatformModel: "p/m", Weight: 1}}}},
			Groups:         []weir.Group{{Name: "default"}},
		}
	}
	for _, tc := range []struct {
		name string
		edit func(c *weir.Catalog)
		want string
	}{
		{"valid", func(c *weir.Catalog) {}, ""},
		{"platform timeout", func(c *weir.Catalog) { c.Platforms[0].CallTimeout = -time.Second },
			"platforms[0].call_timeout: must not be negative"},
		{"candidate twice", func(c *weir.Catalog) {
			c.Models[0].Candidates = append(c.Models[0].Candidates, c.Models[0].Candidates[0])
		},
			`models[0].candidates[1].platform_model: "p/m" listed twice`},
		{"a gemini platform serving embeddings", func(c *weir.Catalog) {
			c.Platforms[0].Kind = "gemini"
			c.Models[0].Kind = weir.KindEmbeddings
		},
			`models[0].candidates[0].platform_model: "p/m" is on platform "p" of kind gemini, which serves no embeddings models`},
		{"a gemini platform serving chat", func(c *weir.Catalog) { c.Platforms[0].Kind = "gemini" }, ""},
		{"a platform model's tokenizer", func(c *weir.Catalog) { c.PlatformModels[0].Tokenizer = weir.TokenizerCL100k }, ""},
		{"an unknown tokenizer", func(c *weir.Catalog) { c.PlatformModels[0].Tokenizer = "p50k_base" },
			`platform_models[0].tokenizer: unknown tokenizer "p50k_base": want estimate, auto, o200k_base, cl100k_base`},
		{"a model's unknown tokenizer", func(c *weir.Catalog) { c.Models[0].Tokenizer = "gpt-4o" },
			`models[0].tokenizer: unknown tokenizer "gpt-4o": want estimate, auto, o200k_base, cl100k_base`},
		{"an azure platform serving images", func(c *weir.Catalog) {
			c.Platforms[0].Kind = "azure"
			c.Models[0].Kind = weir.KindImages
		}, ""},
		{"an azure platform serving video", func(c *weir.Catalog) {
			c.Platforms[0].Kind = "azure"
			c.Models[0].Kind = weir.KindVideo
		},
			`models[0].candidates[0].platform_model: "p/m" is on platform "p" of kind azure, which serves no video models`},
		{"an azure platform signed in with entra id", func(c *weir.Catalog) {
			c.Platforms[0].Kind = "azure"
			c.Platforms[0].TenantID, c.Platforms[0].ClientID, c.Platforms[0].ClientSecret = "t", "c", "s"
			c.Platforms[0].TokenURL = "https://login.example.com/t/oauth2/v2.0/token"
		}, ""},
		{"entra id on openai", func(c *weir.Catalog) { c.Platforms[0].TenantID, c.Platforms[0].ClientID = "t", "c" },
			"platforms[0].tenant_id: Microsoft Entra ID client credentials are an azure platform's"},
		{"a tenant without a client", func(c *weir.Catalog) { c.Platforms[0].Kind, c.Platforms[0].TenantID = "azure", "t" },
			"platforms[0].client_id: a tenant id and a client id go together"},
		{"a client secret alone", func(c *weir.Catalog) { c.Platforms[0].Kind, c.Platforms[0].ClientSecret = "azure", "s" },
			"platforms[0].tenant_id: a client secret and a token url go with a tenant id and a client id"},
		{"entra id and an api key", func(c *weir.Catalog) {
			c.Platforms[0].Kind, c.Platforms[0].APIKey = "azure", "k"
			c.Platforms[0].TenantID, c.Platforms[0].ClientID = "t", "c"
		}, "platforms[0].api_key: an azure platform signs in with Entra ID or sends an API key, not both"},
		{"a relative token url", func(c *weir.Catalog) {
			c.Platforms[0].Kind, c.Platforms[0].TokenURL = "azure", "login/token"
			c.Platforms[0].TenantID, c.Platforms[0].ClientID = "t", "c"
		}, `platforms[0].token_url: "login/token" is not an http or https URL`},
		{"an anthropic platform serving chat", func(c *weir.Catalog) { c.Platforms[0].Kind = "anthropic" }, ""},
		{"an anthropic platform serving embeddings", func(c *weir.Catalog) {
			c.Platforms[0].Kind = "anthropic"
			c.Models[0].Kind = weir.KindEmbeddings
		},
			`models[0].candidates[0].platform_model: "p/m" is on platform "p" of kind anthropic, which serves no embeddings models`},
		{"group limit", func(c *weir.Catalog) {
			c.Groups = append(c.Groups, weir.Group{Name: "g", Limits: weir.Limits{RPM: -1}})
		},
			"groups[1].rpm: must not be negative (0 means no limit)"},
	} {
		c := valid()
		tc.edit(&c)
		err := c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want == "":
		case err == nil || err.Error() != tc.want || !errors.Is(err, weir.ErrInvalid):
			t.Errorf("%s: %v; want %q, matching ErrInvalid", tc.name, err, tc.want)
		}
	}
	err := weir.Limits{MaxWait: -time.Second}.Validate()
	if err == nil || err.Error() != "max_wait: must not be negative (0 means no limit)" || !errors.Is(err, weir.ErrInvalid) {
		t.Errorf("Limits.Validate = %v", err)
	}
}
