package config

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/weir-gateway/weir"
)

const nodeExamplePath = "../examples/node.yaml"

// TestNodeExample keeps examples/node.yaml honest: it loads strictly,
// states the defaults, and serves the mock provider's models.
func TestNodeExample(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(nodeExamplePath)
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseNode(data, env())
	if err != nil {
		t.Fatal(err)
	}
	def := DefaultNode()
	if c.StallTimeout != def.StallTimeout || c.ProbeTimeout != def.ProbeTimeout ||
		c.ShutdownTimeout != def.ShutdownTimeout || c.LogLevel != def.LogLevel || c.TLS != nil {
		t.Errorf("the example's settings differ from the defaults: %+v", c)
	}
	if c.Token != "wn-example" || c.Gateway != "127.0.0.1:50051" {
		t.Errorf("gateway %q token %q", c.Gateway, c.Token)
	}
	if len(c.Providers) != 1 {
		t.Fatalf("providers = %+v", c.Providers)
	}
	p := c.Providers[0]
	if p.URL != "http://127.0.0.1:9090/v1" || p.Adapter != "openai" || p.Slots != 4 || p.LongSlots != 1 {
		t.Errorf("provider = %+v", p)
	}
	want := []NodeModel{{"gpt-4o-mini", "gpt-4o-mini"}, {"text-embedding-3-small", "text-embedding-3-small"}}
	if !reflect.DeepEqual(p.Models, want) {
		t.Errorf("models = %+v, want %+v (runtime defaulting to name)", p.Models, want)
	}

	// The token comes from WEIR_NODE_TOKEN when it is set.
	c, err = parseNode(data, env("WEIR_NODE_TOKEN", "wn-from-env"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Token != "wn-from-env" {
		t.Errorf("token = %q, want the environment's", c.Token)
	}
}

// TestNodeExampleDocumentsEveryField checks that every field of
// NodeConfig is in examples/node.yaml with a comment giving its default
// (or saying it is required), and that every top-level scalar's comment
// names its WEIR_NODE_* variable. The optional tls section is documented
// commented out, so that the example dials in plaintext.
func TestNodeExampleDocumentsEveryField(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(nodeExamplePath)
	if err != nil {
		t.Fatal(err)
	}
	// Uncomment the tls section so that its keys are read like the rest.
	text := strings.NewReplacer("# tls:", "tls:", "#   # ", "  # ", "#   ca:", "  ca:", "#   server_name:", "  server_name:").
		Replace(string(data))
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatal(err)
	}
	comments := map[string]string{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode, yaml.SequenceNode:
			for _, c := range n.Content {
				p := path
				if n.Kind == yaml.SequenceNode {
					p += "[]"
				}
				walk(c, p)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				key := n.Content[i]
				p := key.Value
				if path != "" {
					p = path + "." + p
				}
				c := key.HeadComment + " " + key.LineComment
				if i == 0 {
					c = n.HeadComment + " " + c
				}
				if _, seen := comments[p]; !seen {
					comments[p] = c
				}
				walk(n.Content[i+1], p)
			}
		}
	}
	walk(&doc, "")
	envs := map[string]string{}
	for _, o := range nodeOverrides(DefaultNode()) {
		envs[o.path] = o.env
	}
	if envs["token"] != "WEIR_NODE_TOKEN" {
		t.Errorf("token's variable = %q", envs["token"])
	}
	fields := fieldPaths(reflect.TypeFor[NodeConfig](), "")
	fields = append(fields, "tls.ca", "tls.server_name") // fieldPaths does not enter pointers
	for _, f := range fields {
		c, ok := comments[f]
		switch {
		case !ok:
			t.Errorf("%s: missing from the example", f)
		case !strings.Contains(c, "Default") && !strings.Contains(c, "Required"):
			t.Errorf("%s: its comment does not give the default: %q", f, c)
		case envs[f] != "" && !strings.Contains(c, envs[f]):
			t.Errorf("%s: its comment does not name %s", f, envs[f])
		}
	}
}

// validNode is a node config that loads; each case below breaks one field.
const validNode = `
gateway: gw.internal:8081
token: wn-abc
providers:
  - id: vllm-0
    url: http://127.0.0.1:8000/v1/
    slots: 8
    long_slots: 2
    long_prompt_tokens: 16000
    models:
      - name: llama-3-70b
        runtime: meta-llama/Llama-3-70B-Instruct
      - name: qwen
`

func TestNodeParse(t *testing.T) {
	t.Parallel()
	c, err := parseNode([]byte(validNode), env())
	if err != nil {
		t.Fatal(err)
	}
	p := c.Providers[0]
	if p.URL != "http://127.0.0.1:8000/v1" {
		t.Errorf("url = %q; the trailing slash is trimmed", p.URL)
	}
	if p.Adapter != "openai" || p.Models[1].Runtime != "qwen" || p.Models[0].Runtime != "meta-llama/Llama-3-70B-Instruct" {
		t.Errorf("entry defaults: %+v", p)
	}
	if c.StallTimeout != 60*time.Second || c.ProbeTimeout != 5*time.Second || c.TLS != nil {
		t.Errorf("defaults: %+v", c)
	}

	c, err = parseNode([]byte(validNode+"tls:\n  ca: ${CA}\n  server_name: gw\nstall_timeout: 2m\n"),
		env("CA", "/etc/ca.pem", "WEIR_NODE_PROBE_TIMEOUT", "1s"))
	if err != nil {
		t.Fatal(err)
	}
	if c.TLS == nil || c.TLS.CA != "/etc/ca.pem" || c.TLS.ServerName != "gw" {
		t.Errorf("tls = %+v; ${CA} expanded inside it", c.TLS)
	}
	if c.StallTimeout != 2*time.Minute || c.ProbeTimeout != time.Second {
		t.Errorf("stall %v probe %v", c.StallTimeout, c.ProbeTimeout)
	}
}

func TestNodeRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, from, to string
		env            []string
		want           string
		text           string // the whole file, instead of an edit of validNode
	}{
		{"no gateway", "gateway: gw.internal:8081", "", nil, "gateway: required", ""},
		{"gateway without port", "gw.internal:8081", "gw.internal", nil, "gateway:", ""},
		{"no token", "token: wn-abc", "", nil, "token: required", ""},
		{"not a node token", "wn-abc", "sk-abc", nil, "token: not a node token", ""},
		{"env token checked", "wn-abc", "wn-abc", []string{"WEIR_NODE_TOKEN", "bad"}, "token: not a node token", ""},
		{"zero stall", "providers:", "stall_timeout: 0s\nproviders:", nil, "stall_timeout: must be positive", ""},
		{"negative probe", "providers:", "probe_timeout: -1s\nproviders:", nil, "probe_timeout: must be positive", ""},
		{"bad duration", "providers:", "stall_timeout: 60\nproviders:", nil, "time.Duration", ""},
		{"bad env duration", "", "", []string{"WEIR_NODE_STALL_TIMEOUT", "x"}, "WEIR_NODE_STALL_TIMEOUT", ""},
		{"log level", "providers:", "log_level: loud\nproviders:", nil, "log_level: unknown level", ""},
		{"heap floor", "providers:", "heap_floor: -1\nproviders:", nil, "heap_floor: must not be negative", ""},
		{"unknown field", "slots: 8", "slot: 8", nil, `unknown field "slot" in providers[]`, ""},
		{"unknown tls field", "providers:", "tls:\n  cert: x\nproviders:", nil, `unknown field "cert" in tls`, ""},
		{name: "no providers", text: "gateway: gw:1\ntoken: wn-a\n", want: "providers: required"},
		{"no id", "id: vllm-0", "id: ''", nil, "providers[0].id: required", ""},
		{"bad id", "id: vllm-0", "id: vllm/0", nil, "providers[0].id:", ""},
		{"twice", "      - name: qwen\n", "      - name: qwen\n  - id: vllm-0\n    url: http://x/v1\n    slots: 1\n    models: [{name: a}]\n", nil, "providers[1].id: provider \"vllm-0\" defined twice", ""},
		{"adapter", "slots: 8", "slots: 8\n    adapter: grpc", nil, "providers[0].adapter: unknown adapter", ""},
		{"no url", "url: http://127.0.0.1:8000/v1/", "url: ''", nil, "providers[0].url: required", ""},
		{"url scheme", "http://127.0.0.1:8000/v1/", "ftp://127.0.0.1/v1", nil, "providers[0].url:", ""},
		{"no slots", "slots: 8", "slots: 0", nil, "providers[0].slots:", ""},
		{"long over slots", "long_slots: 2", "long_slots: 9", nil, "providers[0].long_slots:", ""},
		{"long without tokens", "    long_prompt_tokens: 16000\n", "", nil, "providers[0].long_prompt_tokens: required with long_slots", ""},
		{"tokens without long", "    long_slots: 2\n", "", nil, "providers[0].long_prompt_tokens: set without long_slots", ""},
		{name: "no models", text: "gateway: gw:1\ntoken: wn-a\nproviders:\n  - id: a\n    url: http://x/v1\n    slots: 1\n",
			want: "providers[0].models: required"},
		{"model twice", "      - name: qwen\n", "      - name: qwen\n      - name: qwen\n", nil, "providers[0].models[2].name: model \"qwen\" listed twice", ""},
		{"model name space", "name: qwen", "name: 'q wen'", nil, "providers[0].models[1].name:", ""},
		{"runtime space", "runtime: meta-llama/Llama-3-70B-Instruct", "runtime: 'a b'", nil, "providers[0].models[0].runtime:", ""},
		{"unset var", "wn-abc", "${NOPE}", nil, "token: ${NOPE} is not set", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			text := validNode
			if tc.text != "" {
				text = tc.text
			} else if tc.from != "" {
				if !strings.Contains(text, tc.from) {
					t.Fatalf("the valid config has no %q", tc.from)
				}
				text = strings.Replace(text, tc.from, tc.to, 1)
			}
			_, err := parseNode([]byte(text), env(tc.env...))
			if err == nil {
				t.Fatalf("loaded; want an error with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q; want it to say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "sk-abc") {
				t.Errorf("the error echoes the token: %q", err)
			}
			var fe *weir.FieldError
			if errors.As(err, &fe) && !errors.Is(err, weir.ErrInvalid) {
				t.Errorf("a field error that is not ErrInvalid: %v", err)
			}
		})
	}
}

func TestLoadNodeMissing(t *testing.T) {
	t.Parallel()
	_, err := LoadNode(t.TempDir() + "/none.yaml")
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err = %v; want one that is fs.ErrNotExist", err)
	}
}
