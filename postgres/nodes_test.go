package postgres

import "testing"

// TestNodeNameCollation pins nodes.name to the "C" collation: the
// database this runs on may already sort byte by byte (the conformance
// suite's order would then pass without it), but a database created with
// a linguistic default would sort "Zeta" after "alpha" and break the
// listing order both stores promise.
func TestNodeNameCollation(t *testing.T) {
	t.Parallel()
	db := openTemp(t)
	var collation string
	if err := db.Pool().QueryRow(t.Context(), `SELECT coalesce(collation_name, '') FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'nodes' AND column_name = 'name'`).Scan(&collation); err != nil {
		t.Fatal(err)
	}
	if collation != "C" {
		t.Errorf("nodes.name collation %q, want \"C\"", collation)
	}
}
