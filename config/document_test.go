package config

import (
	"strings"
	"testing"
)

const docFile = `# a replica's file
server:
  listen: 127.0.0.1:8081
platforms:
  - name: up
    base_url: ${UP_URL}
    api_key_env: UP_KEY
platform_models:
  - name: up/chat
    platform: up
    upstream: gpt-4o-mini # the upstream's name
    concurrency: 2
    price: {input: 0.000002, output: 0.60}
models:
  - name: chat
    kind: chat
    candidates:
      - platform_model: up/chat
budgets:
  - subject: model:chat
    budget: 5/month
`

// The same catalog laid out otherwise, with other server settings.
const docFileAgain = `storage:
  driver: sqlite
models:
  - kind: chat
    name: chat
    candidates: [{platform_model: up/chat}]
budgets:
  - {subject: "model:chat", budget: 5/month}
platform_models:
  - {name: up/chat, platform: up, upstream: gpt-4o-mini, concurrency: 2, price: {output: 0.60, input: 0.000002}}
platforms:
  - api_key_env: UP_KEY
    name: up
    base_url: ${UP_URL}
`

func TestCatalogDocumentOneHashPerCatalog(t *testing.T) {
	t.Parallel()
	doc, hash, err := CatalogDocument([]byte(docFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"${UP_URL}", "api_key_env: UP_KEY"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("the document has no %q, unresolved:\n%s", want, doc)
		}
	}
	for _, not := range []string{"listen", "comment", "the upstream's name"} {
		if strings.Contains(string(doc), not) {
			t.Errorf("the document has %q, which is no part of the catalog:\n%s", not, doc)
		}
	}
	_, again, err := CatalogDocument([]byte(docFileAgain))
	if err != nil {
		t.Fatal(err)
	}
	if again != hash {
		t.Errorf("the same catalog laid out otherwise hashes %s, not %s", again, hash)
	}
	_, other, err := CatalogDocument([]byte(strings.Replace(docFile, "concurrency: 2", "concurrency: 3", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if other == hash {
		t.Error("a changed limit hashes as before")
	}
	if _, _, err := CatalogDocument([]byte("- a list\n")); err == nil {
		t.Error("a file that is not a mapping gave a document")
	}
}

func TestWithCatalogResolvesHere(t *testing.T) {
	t.Parallel()
	doc, _, err := CatalogDocument([]byte(docFile))
	if err != nil {
		t.Fatal(err)
	}
	lookup := env("UP_URL", "http://127.0.0.1:9999/v1", "UP_KEY", "sk-here")
	own, err := parse([]byte("server:\n  listen: 127.0.0.1:7000\n"), lookup)
	if err != nil {
		t.Fatal(err)
	}
	got, err := own.withCatalog(doc, lookup)
	if err != nil {
		t.Fatal(err)
	}
	if got.Server.Listen != "127.0.0.1:7000" || own.Platforms != nil {
		t.Errorf("server listen %q, own platforms %v: want this replica's settings kept and its config unchanged", got.Server.Listen, own.Platforms)
	}
	cat, err := got.catalog(lookup)
	if err != nil {
		t.Fatal(err)
	}
	if p := cat.Platforms[0]; p.BaseURL != "http://127.0.0.1:9999/v1" || p.APIKey != "sk-here" {
		t.Errorf("platform %+v: want its URL and key from this environment", p)
	}
	if pm := cat.PlatformModels[0]; pm.Limits.Concurrency != 2 || pm.Price.Input.String() != "0.000002" {
		t.Errorf("platform model %+v: want concurrency 2 and input price 0.000002", pm)
	}
	if len(cat.Budgets) != 1 || cat.Models[0].Candidates[0].Weight != 1 {
		t.Errorf("budgets %v, candidates %v: want the budget and the default weight", cat.Budgets, cat.Models[0].Candidates)
	}
	if _, err := own.withCatalog([]byte("platform_models: [{name: x/y, platform: x}]\n"), lookup); err == nil {
		t.Error("a catalog naming an unknown platform was taken")
	}
}

// TestCatalogFailOpenIsTheFleets: fleet.unavailable, the fail_open of
// every entry that does not say, is part of the catalog document (its
// hash changes with it; the fleet section's other settings are not), and
// a replica takes the version's, not its own file's: the default
// (closed) when the version does not say.
func TestCatalogFailOpenIsTheFleets(t *testing.T) {
	t.Parallel()
	open := docFile + "fleet:\n  unavailable: open\n  heartbeat_timeout: 9s\n"
	doc, hash, err := CatalogDocument([]byte(open))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "unavailable: open") || strings.Contains(string(doc), "heartbeat_timeout") {
		t.Errorf("the document has not fleet.unavailable alone of the fleet section:\n%s", doc)
	}
	closedDoc, closedHash, err := CatalogDocument([]byte(docFile))
	if err != nil {
		t.Fatal(err)
	}
	if closedHash == hash {
		t.Error("the catalog with fleet.unavailable open hashes as the one without")
	}
	lookup := env("UP_URL", "http://127.0.0.1:9999/v1", "UP_KEY", "sk-here")
	for _, tc := range []struct {
		name, own string
		doc       []byte
		want      bool
	}{
		{"an open version, a closed replica", "fleet:\n  unavailable: closed\n", doc, true},
		{"a version that does not say, an open replica", "fleet:\n  unavailable: open\n", closedDoc, false},
	} {
		own, err := parse([]byte(tc.own), lookup)
		if err != nil {
			t.Fatal(err)
		}
		got, err := own.withCatalog(tc.doc, lookup)
		if err != nil {
			t.Fatal(err)
		}
		cat, err := got.catalog(lookup)
		if err != nil {
			t.Fatal(err)
		}
		if pm := cat.PlatformModels[0]; pm.FailOpen != tc.want {
			t.Errorf("%s: the platform model fails open %v; want %v, the version's", tc.name, pm.FailOpen, tc.want)
		}
	}
}
