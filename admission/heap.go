package admission

// indexHeap is a binary min-heap that tells each element its position, so
// that any element can be removed or re-ordered in O(log n). It is written
// out rather than built on container/heap to keep the engine's hot path free
// of interface calls and allocations.
type indexHeap[T any] struct {
	items  []T
	less   func(a, b T) bool
	setIdx func(x T, i int)
}

func (h *indexHeap[T]) len() int { return len(h.items) }

func (h *indexHeap[T]) top() T { return h.items[0] }

func (h *indexHeap[T]) push(x T) {
	h.items = append(h.items, x)
	i := len(h.items) - 1
	h.setIdx(x, i)
	h.up(i)
}

// remove takes out the element at i.
func (h *indexHeap[T]) remove(i int) {
	last := len(h.items) - 1
	x := h.items[i]
	if i != last {
		h.swap(i, last)
	}
	var zero T
	h.items[last] = zero
	h.items = h.items[:last]
	h.setIdx(x, -1)
	if i != last {
		h.fix(i)
	}
	if cap(h.items) > 64 && len(h.items) < cap(h.items)/4 {
		h.items = append([]T(nil), h.items...)
	}
}

// fix restores order after the element at i changed its key.
func (h *indexHeap[T]) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h *indexHeap[T]) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.setIdx(h.items[i], i)
	h.setIdx(h.items[j], j)
}

func (h *indexHeap[T]) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(h.items[i], h.items[parent]) {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

func (h *indexHeap[T]) down(i0 int) bool {
	i, n := i0, len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && h.less(h.items[r], h.items[l]) {
			j = r
		}
		if !h.less(h.items[j], h.items[i]) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
