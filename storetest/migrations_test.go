package storetest

import "testing"

// TestNotAdditive: what the migrations' guard lets through, and what it
// stops.
func TestNotAdditive(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		stmt string
		adds bool
	}{
		{"CREATE TABLE t (a int);", true},
		{"CREATE UNLOGGED TABLE IF NOT EXISTS t (a int);", true},
		{"CREATE INDEX i ON old (a);", true},
		{"CREATE UNIQUE INDEX i ON old (a);", false},
		{"ALTER TABLE old ADD COLUMN a text;", true},
		{"ALTER TABLE old ADD COLUMN a text NOT NULL DEFAULT '';", true},
		{"ALTER TABLE old ADD COLUMN a text NOT NULL;", false},
		{"ALTER TABLE old ADD COLUMN a int NOT NULL DEFAULT 0, ADD COLUMN b text CHECK (b IN ('x', 'y'));", true},
		{"ALTER TABLE old ADD COLUMN a int, DROP COLUMN b;", false},
		{"ALTER TABLE old DROP COLUMN a;", false},
		{"ALTER TABLE old RENAME COLUMN a TO b;", false},
		{"ALTER TABLE old ALTER COLUMN a SET NOT NULL;", false},
		{"ALTER TABLE old ADD CONSTRAINT c CHECK (a > 0);", false},
		{"DROP TABLE old;", false},
		{"DROP INDEX i;", false},
		{"UPDATE old SET a = 1;", false},
		{"DELETE FROM old;", false},
		{"INSERT INTO old (a) VALUES (1);", false},
		{"CREATE SEQUENCE s;", true},
		{"CREATE FUNCTION f() RETURNS int AS $$ SELECT 1 $$ LANGUAGE sql;", true},
		{"CREATE OR REPLACE FUNCTION f() RETURNS int AS $$ SELECT 1 $$ LANGUAGE sql;", false},
	} {
		why := notAdditive(c.stmt, map[string]bool{})
		if (why == "") != c.adds {
			t.Errorf("%s: %q; want adds=%t", c.stmt, why, c.adds)
		}
	}
	// What the migration does to a table it makes, no older build sees.
	made := map[string]bool{}
	for _, s := range []string{"CREATE TABLE t (a int);", "CREATE UNIQUE INDEX i ON t (a);",
		"INSERT INTO t (a) VALUES (1);", "ALTER TABLE t ADD COLUMN b int NOT NULL;"} {
		if why := notAdditive(s, made); why != "" {
			t.Errorf("%s on a table the migration makes: %q; want it let through", s, why)
		}
	}
}

// TestUpStatements: a goose file's Up statements, comments and Down left
// out, a StatementBegin block whole.
func TestUpStatements(t *testing.T) {
	t.Parallel()
	got, err := upStatements(`-- +goose Up
-- a comment; with a semicolon
CREATE TABLE t (
    a int -- inline
);
-- +goose StatementBegin
DO $$ BEGIN
  PERFORM 1;
END $$;
-- +goose StatementEnd
ALTER TABLE t ADD COLUMN b int;

-- +goose Down
DROP TABLE t;
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || oneLine(got[1]) != "DO $$ BEGIN PERFORM 1; END $$;" {
		t.Fatalf("Up statements %q; want 3, the block whole", got)
	}
	if _, err := upStatements("-- +goose Up\nCREATE TABLE t (a int)\n"); err == nil {
		t.Error("a statement without its end: no error")
	}
}
