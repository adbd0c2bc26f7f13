package config

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// catalogKeys are the sections of a config file that are its catalog:
// what a fleet holds one version of (weir.CatalogVersion). The rest are
// each replica's own settings.
var catalogKeys = []string{"budgets", "default_group", "groups", "models", "platform_models", "platforms"}

// catalogFleetKeys are the settings of the fleet section that are the
// catalog's too: fleet.unavailable is the fail_open of every platform
// model and group that does not say, so it is one setting for the fleet
// rather than each replica's.
var catalogFleetKeys = []string{"unavailable"}

// CatalogDocument is the catalog of the config file data: its catalog
// sections as they are written — ${VAR} references and api_key_env
// names unresolved, so that it holds no secret — in a canonical YAML
// (comments dropped, aliases expanded, mapping keys sorted, so that the
// layout of a file does not change it), with the fleet section's
// catalogFleetKeys where the file sets them, and its SHA-256 in hex. A file
// with no catalog section gives a document of "{}". It checks the
// syntax only: WithCatalog validates.
func CatalogDocument(data []byte) (doc []byte, hash string, err error) {
	var file yaml.Node
	if err := yaml.Unmarshal(data, &file); err != nil {
		return nil, "", fmt.Errorf("catalog document: %w", err)
	}
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	if len(file.Content) > 0 {
		top := file.Content[0]
		if top.Kind != yaml.MappingNode {
			return nil, "", errors.New("catalog document: the config file is not a mapping of sections")
		}
		for i := 0; i+1 < len(top.Content); i += 2 {
			k, v := top.Content[i], top.Content[i+1]
			switch {
			case slices.Contains(catalogKeys, k.Value):
				out.Content = append(out.Content, k, v)
			case k.Value == "fleet" && v.Kind == yaml.MappingNode:
				if fleet := catalogFleet(v); fleet != nil {
					out.Content = append(out.Content, k, fleet)
				}
			}
		}
	}
	canonical(out)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(out); err != nil {
		return nil, "", fmt.Errorf("catalog document: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, "", fmt.Errorf("catalog document: %w", err)
	}
	sum := sha256.Sum256(b.Bytes())
	return b.Bytes(), hex.EncodeToString(sum[:]), nil
}

// catalogFleet is the fleet section fleet less what is each replica's
// own (catalogFleetKeys); nil if nothing is left.
func catalogFleet(fleet *yaml.Node) *yaml.Node {
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for i := 0; i+1 < len(fleet.Content); i += 2 {
		if slices.Contains(catalogFleetKeys, fleet.Content[i].Value) {
			out.Content = append(out.Content, fleet.Content[i], fleet.Content[i+1])
		}
	}
	if len(out.Content) == 0 {
		return nil
	}
	return out
}

// canonical rewrites n in place: aliases replaced by what they name, no
// anchors, no comments, collections in block style, each mapping's keys
// sorted, scalars quoted only where their type needs it.
func canonical(n *yaml.Node) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		*n = *deepCopy(n.Alias)
	}
	n.Anchor, n.HeadComment, n.LineComment, n.FootComment = "", "", "", ""
	// The tag says a scalar's type; the encoder quotes a string that
	// would otherwise read as another.
	n.Tag, n.Style = n.ShortTag(), 0
	if n.Kind == yaml.ScalarNode {
		return
	}
	for _, c := range n.Content {
		canonical(c)
	}
	if n.Kind != yaml.MappingNode {
		return
	}
	type pair struct{ k, v *yaml.Node }
	pairs := make([]pair, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		pairs = append(pairs, pair{n.Content[i], n.Content[i+1]})
	}
	slices.SortStableFunc(pairs, func(a, b pair) int { return strings.Compare(a.k.Value, b.k.Value) })
	n.Content = n.Content[:0]
	for _, p := range pairs {
		n.Content = append(n.Content, p.k, p.v)
	}
}

// deepCopy copies n and everything under it, so that canonical can
// change an alias's copy without touching what else refers to it.
func deepCopy(n *yaml.Node) *yaml.Node {
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, k := range n.Content {
		c.Content[i] = deepCopy(k)
	}
	return &c
}

// WithCatalog returns a copy of c whose catalog is the document doc's
// (CatalogDocument): decoded, its ${VAR} references expanded from this
// process's environment, its entries' defaults filled, and the whole
// validated. c's own catalog is dropped, and so is its fleet.unavailable
// for the document's (the default where it does not say); the rest of c
// is kept.
func (c *Config) WithCatalog(doc []byte) (*Config, error) {
	return c.withCatalog(doc, os.LookupEnv)
}

func (c *Config) withCatalog(doc []byte, lookup lookupFunc) (*Config, error) {
	cat := &Config{}
	if err := decode(doc, cat); err != nil {
		return nil, fmt.Errorf("the fleet's catalog: %w", err)
	}
	if err := expandStrings(cat, lookup); err != nil {
		return nil, fmt.Errorf("the fleet's catalog: %w", err)
	}
	cat.applyEntryDefaults()
	out := *c
	out.Platforms, out.PlatformModels, out.Models = cat.Platforms, cat.PlatformModels, cat.Models
	out.Groups, out.Budgets, out.DefaultGroup = cat.Groups, cat.Budgets, cat.DefaultGroup
	if out.DefaultGroup == "" {
		out.DefaultGroup = Default().DefaultGroup
	}
	// The fleet's fail_open default is the version's (its default when
	// the version does not say), whatever this replica's file says.
	out.Fleet.Unavailable = cmp.Or(cat.Fleet.Unavailable, Default().Fleet.Unavailable)
	if err := out.Validate(); err != nil {
		return nil, fmt.Errorf("the fleet's catalog: %w", err)
	}
	return &out, nil
}
