package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// notTaken are the keys an inlined struct brings into an entry that the
// entry does not take: the file refuses them as unknown fields. A group's
// scope holds its slots until the request ends, so it has no lease_ttl.
var notTaken = map[reflect.Type][]string{
	reflect.TypeFor[Group](): {"lease_ttl"},
}

// lookupFunc is os.LookupEnv's shape, so tests can pass a map.
type lookupFunc func(string) (string, bool)

func parse(data []byte, lookup lookupFunc) (*Config, error) {
	c := Default()
	c.Server.markBounds()
	if err := decode(data, c); err != nil {
		return nil, err
	}
	if err := expandStrings(c, lookup); err != nil {
		return nil, err
	}
	c.applyEntryDefaults()
	if err := applyOverrides(c, lookup); err != nil {
		return nil, err
	}
	c.Server.settleBounds()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// decode reads one YAML document into c (a *Config or a *NodeConfig),
// rejecting unknown fields.
func decode(data []byte, c any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file: the defaults
		}
		return decodeError(err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
		var doc yaml.Node
		if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
			return err // decoded strictly just now: not expected
		}
		if msgs := refuseNotTaken(doc.Content[0], reflect.TypeOf(c).Elem(), ""); len(msgs) > 0 {
			return errors.New(strings.Join(msgs, "; "))
		}
		return nil
	case err != nil:
		return decodeError(err)
	default:
		return errors.New("more than one YAML document: a config file holds one")
	}
}

// decodeError flattens the YAML library's type errors into one line per
// problem (each names its line) and says what a duration looks like.
func decodeError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		// "line 3: field lisen not found in type config.Server" becomes
		// `line 3: unknown field "lisen" in server`.
		if sm := unknownField.FindStringSubmatch(m); sm != nil {
			m = fmt.Sprintf("%sunknown field %q %s", sm[1], sm[2], whereIn(sectionOf[sm[3]]))
		}
		if strings.Contains(m, "into time.Duration") {
			m += ` (a duration is a Go duration string such as "30s" or "1m30s")`
		}
		msgs[i] = m
	}
	return errors.New(strings.Join(msgs, "; "))
}

var unknownField = regexp.MustCompile(`^(line \d+: )field (.*) not found in type (\S+)$`)

// sectionOf maps a struct type's name, as the YAML library prints it
// ("config.Cooldown"), to where it sits in the file ("server.cooldown").
var sectionOf = func() map[string]string {
	m := map[string]string{}
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		m[t.String()] = path
		for _, f := range fileFields(t) {
			p := yamlName(f)
			if path != "" {
				p = path + "." + p
			}
			switch ft := f.Type; {
			case ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct:
				walk(ft.Elem(), p)
			case ft.Kind() == reflect.Struct && ft != durationType:
				walk(ft, p)
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
				walk(ft.Elem(), p+"[]")
			}
		}
	}
	walk(reflect.TypeFor[Config](), "")
	walk(reflect.TypeFor[NodeConfig](), "")
	return m
}()

// refuseNotTaken reports the keys of a decoded file's node n, of type t in
// section, that the entry does not take (notTaken), as the YAML library
// reports an unknown field. Strict decoding cannot: the inlined struct has
// them.
func refuseNotTaken(n *yaml.Node, t reflect.Type, section string) []string {
	var out []string
	switch {
	case n.Kind == yaml.AliasNode:
		return refuseNotTaken(n.Alias, t, section)
	case t.Kind() == reflect.Pointer:
		return refuseNotTaken(n, t.Elem(), section)
	case n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice:
		for _, e := range n.Content {
			out = append(out, refuseNotTaken(e, t.Elem(), section+"[]")...)
		}
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct && t != durationType:
		fields := map[string]reflect.Type{}
		for _, f := range fileFields(t) {
			fields[yamlName(f)] = f.Type
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" { // a merge: one mapping or a list of them
				merged := []*yaml.Node{v}
				if v.Kind == yaml.SequenceNode {
					merged = v.Content
				}
				for _, m := range merged {
					out = append(out, refuseNotTaken(m, t, section)...)
				}
				continue
			}
			if slices.Contains(notTaken[t], k.Value) {
				out = append(out, fmt.Sprintf("line %d: unknown field %q %s", k.Line, k.Value, whereIn(section)))
				continue
			}
			if ft, ok := fields[k.Value]; ok {
				p := k.Value
				if section != "" {
					p = section + "." + p
				}
				out = append(out, refuseNotTaken(v, ft, p)...)
			}
		}
	}
	return out
}

// whereIn says where in the file section is, for messages.
func whereIn(section string) string {
	if section == "" {
		return "at the top level"
	}
	return "in " + section
}
