package sqlite

import (
	"slices"
	"testing"
)

// TestEachChunk checks that a batch is cut into the largest prepared
// statements that fit, in order, covering every row once.
func TestEachChunk(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n    int
		want []int
	}{
		{0, nil},
		{1, []int{1}},
		{31, []int{16, 8, 4, 2, 1}},
		{50, []int{32, 16, 2}},
		{128, []int{32, 32, 32, 32}},
		{135, []int{32, 32, 32, 32, 4, 2, 1}},
	} {
		var got []int
		next := 0
		err := eachChunk(c.n, func(start, rows, k int) error {
			if start != next || rows != 1<<k {
				t.Errorf("n=%d: chunk at %d of %d rows (k=%d), want it at %d", c.n, start, rows, k, next)
			}
			next += rows
			got = append(got, rows)
			return nil
		})
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("n=%d: chunks %v, %v; want %v", c.n, got, err, c.want)
		}
	}
}
