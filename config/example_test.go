package config

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/httpapi"
	"go.yaml.in/yaml/v3"
)

const examplePath = "../examples/weir.yaml"

// TestExample keeps examples/weir.yaml honest: it loads strictly, is a
// valid catalog for the mock provider, and sets what its comments say.
func TestExample(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	// A fake, empty environment: WEIR_* variables set where the test runs
	// must not change what the file says.
	c, err := parse(data, env())
	if err != nil {
		t.Fatal(err)
	}
	cat, err := c.catalog(env())
	if err != nil {
		t.Fatal(err)
	}

	// The server, storage and fleet sections state every default as it
	// is: this package's, and the bounds' of the packages that apply them.
	want := Default().Server
	want.UpstreamTimeout = gateway.DefaultUpstreamTimeout
	want.UpstreamIdleTimeout = gateway.DefaultUpstreamIdleTimeout
	want.UpstreamCallTimeout = gateway.DefaultUpstreamCallTimeout
	want.DefaultMaxWait = httpapi.DefaultMaxWait
	want.StreamWriteTimeout = httpapi.DefaultStreamWriteTimeout
	if !reflect.DeepEqual(c.Server, want) || !reflect.DeepEqual(c.Storage, Default().Storage) ||
		c.Fleet != Default().Fleet || c.Edge != Default().Edge {
		t.Errorf("server/storage/fleet differ from the defaults:\n got %+v %+v %+v\nwant %+v %+v %+v",
			c.Server, c.Storage, c.Fleet, want, Default().Storage, Default().Fleet)
	}

	for _, p := range cat.Platforms {
		if p.BaseURL != "http://127.0.0.1:9090/v1" {
			t.Errorf("platform %s points at %s; want the mock provider", p.Name, p.BaseURL)
		}
	}
	if names := names(cat.Platforms, func(p weir.Platform) string { return p.Name }); !slices.Equal(names, []string{"mock-a", "mock-b", "mock-bedrock"}) {
		t.Errorf("platforms = %v", names)
	}

	pmA, okA := cat.PlatformModel("mock-a/gpt-4o-mini")
	pmB, okB := cat.PlatformModel("mock-b/gpt-4o-mini")
	if !okA || !okB || pmA.Concurrency != 2 || pmB.Concurrency != 4 || pmA.RPM == 0 || pmA.TPM == 0 {
		t.Errorf("chat platform models: %+v %+v", pmA, pmB)
	}

	kinds := map[weir.ModelKind]int{}
	var chat weir.Model
	for _, m := range cat.Models {
		kinds[m.Kind]++
		if m.Name == "gpt-4o-mini" {
			chat = m
		}
	}
	for _, k := range []weir.ModelKind{weir.KindChat, weir.KindEmbeddings, weir.KindImages, weir.KindSpeech, weir.KindVideo} {
		if kinds[k] == 0 {
			t.Errorf("no %s model", k)
		}
	}
	if len(chat.Candidates) != 2 || chat.Kind != weir.KindChat ||
		chat.Candidates[0].PlatformModel != "mock-a/gpt-4o-mini" ||
		chat.Candidates[1].PlatformModel != "mock-b/gpt-4o-mini" ||
		chat.Candidates[0].Priority <= chat.Candidates[1].Priority {
		t.Errorf("gpt-4o-mini = %+v; want mock-a first, mock-b as the fallback", chat)
	}

	for _, pm := range cat.PlatformModels {
		if pm.Price.IsZero() {
			t.Errorf("platform model %s has no price", pm.Name)
		}
	}
	if img, _ := cat.PlatformModel("mock-b/gpt-image-1"); img.Price.ImagePrice("1024x1024", "low").String() != "0.011" {
		t.Errorf("gpt-image-1 1024x1024/low: %s", img.Price.ImagePrice("1024x1024", "low"))
	}
	if pmA.Price.CachedInput.String() != "0.075" {
		t.Errorf("gpt-4o-mini cached input: %s", pmA.Price.CachedInput)
	}

	groups := map[string]weir.Group{}
	for _, g := range cat.Groups {
		groups[g.Name] = g
	}
	if len(groups) != 2 || groups["premium"].Priority <= groups["default"].Priority || c.DefaultGroup != "default" {
		t.Errorf("groups = %+v; want default and premium, premium higher", cat.Groups)
	}
}

func names[T any](s []T, name func(T) string) []string {
	var out []string
	for _, v := range s {
		out = append(out, name(v))
	}
	return out
}

// TestExampleDocumentsEveryField checks that every field of Config appears
// in examples/weir.yaml with a comment giving its default (or saying it is
// required), and that the comments of the sections with environment
// overrides (server, storage, fleet) name the field's variable. A field added to Config without its documentation
// fails here.
func TestExampleDocumentsEveryField(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	// First occurrence of each key path, with the comments around it.
	comments := map[string]string{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, path+"[]")
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				key := n.Content[i]
				p := key.Value
				if path != "" {
					p = path + "." + key.Value
				}
				text := key.HeadComment + " " + key.LineComment
				if i == 0 {
					// The comment above "- name:" belongs to the mapping.
					text = n.HeadComment + " " + text
				}
				if _, seen := comments[p]; !seen {
					comments[p] = text
				}
				walk(n.Content[i+1], p)
			}
		}
	}
	walk(&doc, "")

	envNames := map[string]string{} // path -> WEIR_* variable
	overridden := map[string]bool{} // top-level sections with variables
	for _, o := range overrides(Default()) {
		envNames[o.path] = o.env
		section, _, _ := strings.Cut(o.path, ".")
		overridden[section] = true
	}
	for _, section := range []string{"server", "storage", "fleet"} {
		if !overridden[section] {
			t.Errorf("%s: no environment overrides", section)
		}
	}

	fields := fieldPaths(reflect.TypeFor[Config](), "")
	if len(fields) < 50 {
		t.Fatalf("only %d field paths found; the walk is broken", len(fields))
	}
	for _, f := range fields {
		text, ok := comments[f]
		if !ok {
			t.Errorf("%s: missing from the example", f)
			continue
		}
		if strings.TrimSpace(text) == "" {
			t.Errorf("%s: no comment", f)
		} else if fieldKind(f) != reflect.Struct && !strings.Contains(text, "Default") && !strings.Contains(text, "Required") {
			t.Errorf("%s: its comment does not give the default: %q", f, text)
		}
		if section, _, nested := strings.Cut(f, "."); nested && overridden[section] {
			if name := envNames[f]; name == "" {
				// A nested section like server.cooldown has no variable itself.
				if fieldKind(f) != reflect.Struct {
					t.Errorf("%s: no environment override", f)
				}
			} else if !strings.Contains(text, name) {
				t.Errorf("%s: its comment does not name %s", f, name)
			}
		}
	}
	for p := range comments {
		if !slices.Contains(fields, p) && !underMap(fields, p) {
			t.Errorf("%s: in the example but not a field", p) // strict decoding would fail first
		}
	}
}

// underMap reports whether p is a key of a map field of fields (a
// price's images by size): the example writes keys of its own there.
func underMap(fields []string, p string) bool {
	for _, f := range fields {
		if strings.HasPrefix(p, f+".") && typeAt(f).Kind() == reflect.Map {
			return true
		}
	}
	return false
}

// typeAt is the type of the Config field at a key path as fieldPaths
// writes it ("models[].node_price.images"); a list's at "[]" is its
// element's.
func typeAt(path string) reflect.Type {
	t := reflect.TypeFor[Config]()
	for _, part := range strings.Split(path, ".") {
		name, list := strings.CutSuffix(part, "[]")
		for _, f := range fileFields(t) {
			if yamlName(f) == name {
				t = f.Type
				break
			}
		}
		if list && t.Kind() == reflect.Slice {
			t = t.Elem()
		}
	}
	return t
}

// fieldPaths lists every key path of t as the example writes it:
// "server.cooldown.failures", "models[].candidates[].weight".
func fieldPaths(t reflect.Type, prefix string) []string {
	var out []string
	for _, f := range fileFields(t) {
		p := yamlName(f)
		if prefix != "" {
			p = prefix + "." + p
		}
		out = append(out, p)
		switch ft := f.Type; {
		case ft == reflect.TypeFor[time.Duration]():
		case ft.Kind() == reflect.Struct:
			out = append(out, fieldPaths(ft, p)...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out = append(out, fieldPaths(ft.Elem(), p+"[]")...)
		}
	}
	return out
}

// fieldKind is the kind of the Config field at a dotted path.
func fieldKind(path string) reflect.Kind {
	t := reflect.TypeFor[Config]()
	for _, part := range strings.Split(path, ".") {
		for _, f := range fileFields(t) {
			if yamlName(f) == part {
				t = f.Type
				break
			}
		}
	}
	return t.Kind()
}

// TestExamplePostgres keeps examples/weir-postgres.yaml honest: it loads
// strictly, puts storage in a database of its own on the local
// PostgreSQL (not the tests' database), and serves the same models from
// the same platform models as examples/weir.yaml.
func TestExamplePostgres(t *testing.T) {
	t.Parallel()
	load := func(path string) (*Config, weir.Catalog) {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		c, err := parse(data, env())
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		cat, err := c.catalog(env())
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return c, cat
	}
	c, cat := load("../examples/weir-postgres.yaml")
	_, full := load(examplePath)
	want := Storage{Driver: "postgres", Path: "weir.db", DSN: "postgres://postgres@127.0.0.1:5432/weir"}
	if c.Storage != want {
		t.Errorf("storage = %+v, want %+v", c.Storage, want)
	}
	if !reflect.DeepEqual(c.Server, Default().Server) {
		t.Errorf("server differs from the defaults:\n got %+v\nwant %+v", c.Server, Default().Server)
	}
	model := func(m weir.Model) string {
		var cands []string
		for _, cand := range m.Candidates {
			cands = append(cands, cand.PlatformModel)
		}
		return fmt.Sprintf("%s (%s) on %v", m.Name, m.Kind, cands)
	}
	pm := func(p weir.PlatformModel) string {
		return fmt.Sprintf("%s on %s, concurrency %d", p.Name, p.Platform, p.Concurrency)
	}
	if got, want := names(cat.Models, model), names(full.Models, model); !slices.Equal(got, want) {
		t.Errorf("models %v, want weir.yaml's %v", got, want)
	}
	if got, want := names(cat.PlatformModels, pm), names(full.PlatformModels, pm); !slices.Equal(got, want) {
		t.Errorf("platform models %v, want weir.yaml's %v", got, want)
	}
}

// TestExamplesMockURL: the mock provider's URL is named once in each
// example, so that WEIR_MOCK_URL moves every platform (and the node's
// runtime) to a mock on another port.
func TestExamplesMockURL(t *testing.T) {
	t.Parallel()
	const moved = "http://127.0.0.1:9191/v1"
	for _, path := range []string{examplePath, "../examples/weir-postgres.yaml"} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		named := 0
		for _, line := range strings.Split(string(data), "\n") {
			if !strings.HasPrefix(strings.TrimSpace(line), "#") {
				named += strings.Count(line, "127.0.0.1:9090")
			}
		}
		if named != 1 {
			t.Errorf("%s names the mock's address %d times outside comments", path, named)
		}
		c, err := parse(data, env("WEIR_MOCK_URL", moved))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, p := range c.Platforms {
			if p.BaseURL != moved {
				t.Errorf("%s: platform %s at %s, want %s", path, p.Name, p.BaseURL, moved)
			}
		}
	}
	data, err := os.ReadFile(nodeExamplePath)
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseNode(data, env("WEIR_MOCK_URL", moved))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Providers[0].URL; got != moved {
		t.Errorf("node.yaml's runtime at %s, want %s", got, moved)
	}
}
