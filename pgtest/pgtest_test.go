package pgtest

import (
	"context"
	"testing"
)

// TestSchemaIsolated: two schemas do not see each other's tables, and a
// second pool on the same DSN sees the first's.
func TestSchemaIsolated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := Pool(t), Pool(t)
	if _, err := a.Exec(ctx, "CREATE TABLE x (v int)"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Exec(ctx, "CREATE TABLE x (v int)"); err != nil {
		t.Fatalf("a table of the same name in another schema: %v", err)
	}
	if _, err := a.Exec(ctx, "INSERT INTO x VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.QueryRow(ctx, "SELECT count(*) FROM x").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the other schema's table has %d rows (%v); want 0", n, err)
	}
}
