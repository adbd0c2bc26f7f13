// Package config reads Weir's YAML config file: the server, storage and
// fleet settings, and the catalog (platforms, platform models, public
// models, groups, budgets) that Catalog turns into a weir.Catalog.
//
// Parse (and Load, which reads a file and parses it) goes through these
// steps, in order:
//
//  1. Defaults: the file is decoded over Default(), so a field left out keeps
//     its default and a field written as 0 is 0.
//  2. Strict decoding: an unknown field is an error naming its line, and so
//     is a value of the wrong type. Durations are Go duration strings ("30s",
//     "1m30s"); a bare number is not a duration.
//  3. ${VAR} expansion in every string value: "${VAR}" is replaced by the
//     variable's value and is an error when VAR is not set; "${VAR:-text}"
//     gives text when VAR is unset or empty; "$${" is a literal "${".
//     Numbers and durations are never expanded: use the overrides below.
//  4. Per-entry defaults: a platform's kind defaults to "openai", a
//     candidate's weight to 1.
//  5. Environment overrides: WEIR_<SECTION>_<FIELD> sets any scalar field
//     of the server, storage and fleet sections, e.g. WEIR_SERVER_LISTEN,
//     WEIR_SERVER_MAX_BODY_BYTES, WEIR_SERVER_COOLDOWN_FAILURES,
//     WEIR_STORAGE_PATH, WEIR_STORAGE_DSN, WEIR_FLEET_SECRET. An empty
//     variable is ignored; a value that does not parse is an error naming
//     the variable.
//  6. Validate, which checks what is the file's own (server, storage and
//     fleet settings, api_key_env names, the default group) and then the
//     catalog by weir.Catalog.Validate, the one set of catalog rules, and
//     reports the first problem with its path in the file, e.g.
//     `platform_models[2].platform: unknown platform "x"`. The fleet
//     section is checked in full with driver postgres only; sqlite ignores
//     it but for negative durations.
//
// Platform credentials never sit in the file: a platform names the
// environment variable that holds its key (api_key_env), and Catalog reads
// it. examples/weir.yaml documents every field with its default.
package config
