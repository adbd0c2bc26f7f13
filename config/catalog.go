package config

import (
	"os"

	"github.com/weir-gateway/weir"
)

// Catalog validates c and converts its catalog to the domain's. Each
// platform's credential is read from the environment variable its
// api_key_env names; an unset variable gives an empty key, which is
// allowed (the mock provider needs none). The default group is added,
// with no limits, when the config does not define it. The result passes
// weir.Catalog.Validate.
func (c *Config) Catalog() (weir.Catalog, error) {
	return c.catalog(os.LookupEnv)
}

func (c *Config) catalog(lookup lookupFunc) (weir.Catalog, error) {
	if err := c.Validate(); err != nil {
		return weir.Catalog{}, err
	}
	return c.toCatalog(lookup), nil
}

// toCatalog converts c's catalog, entry for entry in the file's order,
// without validating it.
func (c *Config) toCatalog(lookup lookupFunc) weir.Catalog {
	var cat weir.Catalog
	for _, p := range c.Platforms {
		kind := p.Kind
		if kind == "" {
			kind = "openai" // a Config built in code may skip Parse's defaults
		}
		env := func(name string) string {
			if name == "" {
				return ""
			}
			v, _ := lookup(name)
			return v
		}
		key := env(p.APIKeyEnv)
		cat.Platforms = append(cat.Platforms, weir.Platform{
			Name:               p.Name,
			Kind:               kind,
			BaseURL:            p.BaseURL,
			APIKey:             key,
			Timeout:            p.Timeout,
			IdleTimeout:        p.IdleTimeout,
			CallTimeout:        p.CallTimeout,
			Region:             p.Region,
			AccessKeyID:        env(p.AccessKeyIDEnv),
			SecretAccessKey:    env(p.SecretAccessKeyEnv),
			SessionToken:       env(p.SessionTokenEnv),
			TenantID:           p.TenantID,
			ClientID:           p.ClientID,
			ClientSecret:       env(p.ClientSecretEnv),
			TokenURL:           p.TokenURL,
			APIVersion:         p.APIVersion,
			TranslateResponses: p.Responses == "translate",
		})
	}
	for _, pm := range c.PlatformModels {
		cat.PlatformModels = append(cat.PlatformModels, weir.PlatformModel{
			Name:      pm.Name,
			Platform:  pm.Platform,
			Upstream:  pm.Upstream,
			Limits:    pm.Limits,
			FailOpen:  c.failOpen(pm.FailOpen),
			Supports:  pm.Capabilities,
			Simulate:  pm.Simulate,
			Price:     pm.Price,
			Tokenizer: pm.Tokenizer,
		})
	}
	for _, m := range c.Models {
		model := weir.Model{Name: m.Name, Kind: m.Kind, Nodes: m.Nodes, Affinity: m.Affinity, AffinityWait: m.AffinityWait,
			NodePrice: m.NodePrice, Tokenizer: m.Tokenizer}
		for _, cd := range m.Candidates {
			weight := cd.Weight
			if weight == 0 {
				weight = 1 // a Config built in code may skip Parse's defaults
			}
			model.Candidates = append(model.Candidates, weir.Candidate{
				PlatformModel: cd.PlatformModel,
				Priority:      cd.Priority,
				Weight:        weight,
			})
		}
		cat.Models = append(cat.Models, model)
	}
	hasDefault := false
	for _, g := range c.Groups {
		hasDefault = hasDefault || g.Name == c.DefaultGroup
		cat.Groups = append(cat.Groups, weir.Group{
			Name:        g.Name,
			Priority:    g.Priority,
			Limits:      g.Limits,
			RoundRobin:  g.RoundRobin,
			FailOpen:    c.failOpen(g.FailOpen),
			RunModes:    g.RunModes,
			PinPlatform: g.PinPlatform,
		})
	}
	if !hasDefault {
		cat.Groups = append(cat.Groups, weir.Group{Name: c.DefaultGroup, FailOpen: c.failOpen(nil)})
	}
	cat.Budgets = c.budgets()
	return cat
}

// failOpen is an entry's fail_open, or fleet.unavailable's when the
// entry does not say.
func (c *Config) failOpen(entry *bool) bool {
	if entry != nil {
		return *entry
	}
	return c.Fleet.Unavailable == UnavailableOpen
}
