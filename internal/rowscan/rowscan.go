// Package rowscan reads query results the same way on both stores'
// drivers. database/sql's *sql.Rows and pgx's Rows have the same Next,
// Scan and Err, and *sql.Row and pgx.Row the same Scan: a store writes
// one scan function for its columns, which reads a row of a listing and
// the row of a lookup alike, and lists with Append.
//
// What differs between the stores stays in each: how a query is run, how
// a column is decoded (SQLite keeps times as text, PostgreSQL as
// timestamptz), and which error means "no row".
package rowscan

// Row is one row to scan: *sql.Row, *sql.Rows, pgx.Row or pgx.Rows.
type Row interface {
	Scan(dest ...any) error
}

// Rows is a result being read: *sql.Rows or pgx.Rows.
type Rows interface {
	Row
	Next() bool
	Err() error
}

// Append scans every row left in rows with scan and appends what it
// reads to out, which may be nil or sized beforehand. It stops at the
// first error, scan's or the result's. The caller closes rows.
func Append[T any](out []T, rows Rows, scan func(Row) (T, error)) ([]T, error) {
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
