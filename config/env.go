package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weir-gateway/weir"
)

// yamlName is the key a struct field is written as in the file.
func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "" {
		name = strings.ToLower(f.Name)
	}
	return name
}

// fileFields lists the fields of struct type t as the file writes them:
// the fields of an inlined struct (`yaml:",inline"`) in its place, less
// those t's entries do not take (notTaken). Each field's Index reaches it
// from t (reflect.Value.FieldByIndex).
func fileFields(t reflect.Type) []reflect.StructField {
	var out []reflect.StructField
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous || slices.Contains(notTaken[t], yamlName(f)) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// expandStrings replaces ${VAR} references in every string field of c (a
// *Config or a *NodeConfig). It walks the struct by reflection so that a
// field added later is covered without anyone remembering to list it here.
func expandStrings(c any, lookup lookupFunc) error {
	return expandValue(reflect.ValueOf(c).Elem(), "", lookup)
}

func expandValue(v reflect.Value, path string, lookup lookupFunc) error {
	switch v.Kind() {
	case reflect.String:
		s, err := expand(v.String(), lookup)
		if err != nil {
			return &weir.FieldError{Path: path, Msg: err.Error()}
		}
		v.SetString(s)
	case reflect.Pointer:
		if !v.IsNil() {
			return expandValue(v.Elem(), path, lookup)
		}
	case reflect.Struct:
		for _, f := range fileFields(v.Type()) {
			p := yamlName(f)
			if path != "" {
				p = path + "." + p
			}
			if err := expandValue(v.FieldByIndex(f.Index), p, lookup); err != nil {
				return err
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			if err := expandValue(v.Index(i), fmt.Sprintf("%s[%d]", path, i), lookup); err != nil {
				return err
			}
		}
	}
	return nil
}

// expand replaces ${VAR} with VAR's value (an error if VAR is unset) and
// ${VAR:-text} with VAR's value, or text when VAR is unset or empty. "$${"
// is a literal "${". A "$" followed by anything else is left alone, so
// tokens and passwords containing "$" survive.
func expand(s string, lookup lookupFunc) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		if i > 0 && s[i-1] == '$' {
			b.WriteString(s[:i]) // keeps one "$" of "$$"
			b.WriteString("{")
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("unclosed %q", s[i:])
		}
		ref := s[i+2 : i+end]
		s = s[i+end+1:]
		name, def, hasDef := strings.Cut(ref, ":-")
		if !validEnvName(name) {
			return "", fmt.Errorf("bad reference ${%s}: want ${NAME} or ${NAME:-default}", ref)
		}
		val, ok := lookup(name)
		switch {
		case hasDef && val == "":
			val = def
		case !ok:
			return "", fmt.Errorf("${%s} is not set (write ${%s:-} to allow it to be empty)", name, name)
		}
		b.WriteString(val)
	}
}

// validEnvName reports whether s is a portable environment variable name.
func validEnvName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// override is one WEIR_* variable and the field it sets.
type override struct {
	env   string
	path  string // the field's path in the file: "server.cooldown.failures"
	field reflect.Value
}

// overrides lists the environment variables that can set c's server,
// storage, fleet and edge fields: WEIR_<SECTION>_<FIELD>, with nested sections
// joined by "_" (WEIR_SERVER_COOLDOWN_FAILURES).
func overrides(c *Config) []override {
	var out []override
	out = append(out, sectionOverrides(reflect.ValueOf(&c.Server).Elem(), "WEIR_SERVER", "server")...)
	out = append(out, sectionOverrides(reflect.ValueOf(&c.Storage).Elem(), "WEIR_STORAGE", "storage")...)
	out = append(out, sectionOverrides(reflect.ValueOf(&c.Fleet).Elem(), "WEIR_FLEET", "fleet")...)
	out = append(out, sectionOverrides(reflect.ValueOf(&c.Edge).Elem(), "WEIR_EDGE", "edge")...)
	return out
}

// sectionOverrides lists the variables of the scalar fields of struct v,
// found at path in the file: env + "_" + the field's key in upper case,
// nested structs walked. Lists and optional sections (pointers) have none.
func sectionOverrides(v reflect.Value, env, path string) []override {
	var out []override
	for _, f := range fileFields(v.Type()) {
		env, p := env+"_"+strings.ToUpper(yamlName(f)), yamlName(f)
		if path != "" {
			p = path + "." + p
		}
		switch f.Type.Kind() {
		case reflect.Struct:
			out = append(out, sectionOverrides(v.FieldByIndex(f.Index), env, p)...)
		case reflect.Slice, reflect.Pointer, reflect.Map:
		default:
			out = append(out, override{env: env, path: p, field: v.FieldByIndex(f.Index)})
		}
	}
	return out
}

// applyOverrides sets each field whose WEIR_* variable is set and not empty.
func applyOverrides(c *Config, lookup lookupFunc) error {
	return applyEach(overrides(c), lookup)
}

// applyEach sets the field of each override whose variable is set and not
// empty.
func applyEach(list []override, lookup lookupFunc) error {
	for _, o := range list {
		s, ok := lookup(o.env)
		if !ok || s == "" {
			continue
		}
		if err := setScalar(o.field, s); err != nil {
			return fmt.Errorf("environment %s=%q: %w", o.env, s, err)
		}
	}
	return nil
}

var durationType = reflect.TypeFor[time.Duration]()

// setScalar parses s into a string, integer, bool or duration field.
func setScalar(v reflect.Value, s string) error {
	if v.Type() == durationType {
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf(`not a duration (want a Go duration such as "30s")`)
		}
		v.SetInt(int64(d))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("not an integer that fits %s", v.Type())
		}
		v.SetInt(n)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("not true or false")
		}
		v.SetBool(b)
	default:
		// A field type this switch does not know is a programming error,
		// caught by the tests that set every override.
		return fmt.Errorf("field type %s cannot be set from the environment", v.Type())
	}
	return nil
}
