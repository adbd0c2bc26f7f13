package storetest

import (
	"bufio"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Additive checks the rule that lets two builds share one database
// during a rolling upgrade (docs/upgrades.md): each migration in fsys (goose
// files, NNNNN_name.sql) only adds what an older build does not see —
// tables, columns an older build's writes may leave out (nullable, or
// NOT NULL with a default), indexes that refuse none of its writes,
// sequences, functions and triggers new in the migration — so that the
// build before it keeps reading and writing beside the newer schema. A
// destructive change (drop, rename, a new constraint on what exists, a
// rewrite of rows) is split over two releases: the first stops using
// what the second removes. reviewed names the migrations that do more,
// each with why an older build is unharmed (or why it needs a full
// stop); a name in it that no longer does more is an error too, so the
// list stays true.
func Additive(t *testing.T, fsys fs.FS, reviewed map[string]string) {
	t.Helper()
	files, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no migrations to check")
	}
	for _, name := range files {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			t.Fatal(err)
		}
		stmts, err := upStatements(string(b))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var bad []string
		made := map[string]bool{} // tables the migration creates
		for _, s := range stmts {
			if why := notAdditive(s, made); why != "" {
				bad = append(bad, fmt.Sprintf("%s: %s", why, oneLine(s)))
			}
		}
		base := path.Base(name)
		_, ok := reviewed[base]
		switch {
		case len(bad) > 0 && !ok:
			t.Errorf("migration %s does more than add, which an older build running beside it may not survive "+
				"(split the change over two releases, or review it and list it with why: docs/upgrades.md):\n\t%s",
				base, strings.Join(bad, "\n\t"))
		case len(bad) == 0 && ok:
			t.Errorf("migration %s is listed as reviewed but only adds: take it off the list", base)
		}
	}
	for name := range reviewed {
		if !slices.ContainsFunc(files, func(f string) bool { return path.Base(f) == name }) {
			t.Errorf("reviewed migration %s does not exist", name)
		}
	}
}

// upStatements returns a goose migration's Up statements, comments left
// out: goose's rule is that a statement ends with a line that ends in a
// semicolon, unless it is between StatementBegin and StatementEnd.
func upStatements(text string) ([]string, error) {
	var (
		out   []string
		cur   strings.Builder
		up    bool
		block bool
	)
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "-- +goose Up"):
			up = true
			continue
		case strings.HasPrefix(line, "-- +goose Down"):
			up = false
			continue
		case strings.HasPrefix(line, "-- +goose StatementBegin"):
			block = true
			continue
		case strings.HasPrefix(line, "-- +goose StatementEnd"):
			block = false
			if up && strings.TrimSpace(cur.String()) != "" {
				out = append(out, cur.String())
			}
			cur.Reset()
			continue
		case strings.HasPrefix(line, "--") || line == "" || !up:
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if !block && strings.HasSuffix(line, ";") {
			out = append(out, cur.String())
			cur.Reset()
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if strings.TrimSpace(cur.String()) != "" {
		return nil, fmt.Errorf("a statement without its end: %s", oneLine(cur.String()))
	}
	return out, nil
}

var (
	createTable = regexp.MustCompile(`^CREATE (?:UNLOGGED |TEMP |TEMPORARY )?TABLE (?:IF NOT EXISTS )?([\w."]+)`)
	createIndex = regexp.MustCompile(`^CREATE (UNIQUE )?INDEX (?:CONCURRENTLY )?(?:IF NOT EXISTS )?[\w."]+ ON (?:ONLY )?([\w."]+)`)
	alterTable  = regexp.MustCompile(`^ALTER TABLE (?:IF EXISTS )?(?:ONLY )?([\w."]+) (.*)$`)
	insertInto  = regexp.MustCompile(`^INSERT INTO ([\w."]+)`)
	createOther = regexp.MustCompile(`^CREATE (?:SEQUENCE|FUNCTION|TRIGGER|TYPE|VIEW) `)
	addColumn   = regexp.MustCompile(`^ADD (?:COLUMN )?(?:IF NOT EXISTS )?[\w"]+ `)
	spaces      = regexp.MustCompile(`\s+`)
)

// notAdditive says why statement s does more than add, or "" if it only
// adds; made collects the tables the migration creates (what it does to
// them an older build never sees).
func notAdditive(s string, made map[string]bool) string {
	u := strings.ToUpper(oneLine(s))
	switch {
	case createTable.MatchString(u):
		made[createTable.FindStringSubmatch(u)[1]] = true
		return ""
	case createIndex.MatchString(u):
		m := createIndex.FindStringSubmatch(u)
		if m[1] != "" && !made[m[2]] {
			return "a unique index on an existing table refuses writes an older build makes"
		}
		return ""
	case alterTable.MatchString(u):
		m := alterTable.FindStringSubmatch(u)
		for _, clause := range topLevelSplit(strings.TrimSuffix(m[2], ";")) {
			clause = strings.TrimSpace(clause)
			switch {
			case made[m[1]]:
			case !addColumn.MatchString(clause) || strings.HasPrefix(clause, "ADD CONSTRAINT"):
				return "alters what an older build uses"
			case strings.Contains(clause, "NOT NULL") && !strings.Contains(clause, "DEFAULT"):
				return "a NOT NULL column without a default refuses an older build's inserts"
			}
		}
		return ""
	case insertInto.MatchString(u):
		if made[insertInto.FindStringSubmatch(u)[1]] {
			return ""
		}
		return "writes rows of a table an older build uses"
	case createOther.MatchString(u), strings.HasPrefix(u, "COMMENT ON "):
		return ""
	}
	return "neither creates nor adds"
}

// topLevelSplit splits s at the commas outside parentheses.
func topLevelSplit(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// oneLine is s with its runs of white space made one space.
func oneLine(s string) string { return strings.TrimSpace(spaces.ReplaceAllString(s, " ")) }
