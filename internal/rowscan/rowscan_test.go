package rowscan_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/weir-gateway/weir/internal/rowscan"
)

// fakeRows holds rows of one int column, and the error Err reports
// after the last.
type fakeRows struct {
	rows []int
	at   int
	err  error
}

func (r *fakeRows) Next() bool {
	r.at++
	return r.at <= len(r.rows)
}

func (r *fakeRows) Scan(dest ...any) error {
	*dest[0].(*int) = r.rows[r.at-1]
	return nil
}

func (r *fakeRows) Err() error { return r.err }

func scanInt(row rowscan.Row) (int, error) {
	var v int
	err := row.Scan(&v)
	return v, err
}

func TestAppend(t *testing.T) {
	t.Parallel()
	got, err := rowscan.Append(make([]int, 0, 3), &fakeRows{rows: []int{1, 2, 3}}, scanInt)
	if err != nil || !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("Append = %v, %v; want [1 2 3]", got, err)
	}
	got, err = rowscan.Append([]int{0}, &fakeRows{rows: []int{1}}, scanInt)
	if err != nil || !slices.Equal(got, []int{0, 1}) {
		t.Errorf("Append to [0] = %v, %v; want [0 1]", got, err)
	}
	if got, err := rowscan.Append(nil, &fakeRows{}, scanInt); err != nil || len(got) != 0 {
		t.Errorf("Append of no rows = %v, %v; want none", got, err)
	}

	lost := errors.New("connection lost")
	if got, err := rowscan.Append(nil, &fakeRows{rows: []int{1}, err: lost}, scanInt); !errors.Is(err, lost) || got != nil {
		t.Errorf("Append of a result that failed = %v, %v; want nil, its error", got, err)
	}
	bad := func(row rowscan.Row) (int, error) {
		v, _ := scanInt(row)
		if v == 2 {
			return 0, fmt.Errorf("row %d: %w", v, lost)
		}
		return v, nil
	}
	if got, err := rowscan.Append(nil, &fakeRows{rows: []int{1, 2, 3}}, bad); !errors.Is(err, lost) || got != nil {
		t.Errorf("Append with a row that does not scan = %v, %v; want nil, scan's error", got, err)
	}
}
