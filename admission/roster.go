package admission

import (
	"cmp"
	"slices"
)

// roster holds a class's members in arrival order, so that its head is its
// first live slot and the number of members that arrived before a given
// arrival is a binary search away (Position needs it; see aheadIn).
//
// A member that leaves turns its slot into a tombstone that keeps its seq,
// so the slots stay sorted and a member is found by its seq without an
// index stored in the waiter. Tombstones before the head are sliced off a
// block at a time; the others are compacted away once they outnumber the
// members, which costs O(1) moves per removal, amortized. To
// count live slots in a range without walking it, tombstones are counted
// per block of rosterBlock slots.
//
// Waiters join in arrival order (a push is an append) and leave mostly from
// the head (an admission), so both are O(1). Only a waiter that re-resolves
// into a class whose members include later arrivals is inserted, into the
// nearest tombstone if there is one, else by shifting the later slots.
type roster struct {
	slots []rosterSlot
	lo    int     // the first live slot, when n > 0
	n     int     // live members
	dead  []int32 // tombstones in each block of rosterBlock slots
}

type rosterSlot struct {
	seq uint64
	w   *waiter // nil for a tombstone
}

const (
	rosterShift = 8
	rosterBlock = 1 << rosterShift
)

func (r *roster) len() int { return r.n }

func (r *roster) head() *waiter { return r.slots[r.lo].w }

func (r *roster) push(w *waiter) {
	if r.n == 0 {
		r.reset()
	}
	k := len(r.slots)
	if k == 0 || r.slots[k-1].seq < w.seq {
		if k&(rosterBlock-1) == 0 {
			r.dead = append(r.dead, 0)
		}
		r.slots = append(r.slots, rosterSlot{seq: w.seq, w: w})
		r.n++
		return
	}
	r.insert(w)
}

// insert places w, which arrived before the last slot, in arrival order.
func (r *roster) insert(w *waiter) {
	r.n++
	// The slot before w's place and the one at it bound w's seq, so either,
	// if a tombstone, can take w without moving anything.
	i := r.search(0, w.seq)
	for _, j := range [2]int{i, i - 1} {
		if j >= 0 && j < len(r.slots) && r.slots[j].w == nil {
			r.slots[j] = rosterSlot{seq: w.seq, w: w}
			r.dead[j>>rosterShift]--
			r.lo = min(r.lo, j)
			return
		}
	}
	r.slots = slices.Insert(r.slots, i, rosterSlot{seq: w.seq, w: w})
	r.lo = min(r.lo, i)
	r.recount(i)
}

func (r *roster) remove(w *waiter) {
	i := r.lo
	if r.slots[i].w != w {
		i = r.find(w)
	}
	r.slots[i].w = nil
	r.dead[i>>rosterShift]++
	r.n--
	if r.n == 0 {
		r.reset()
		return
	}
	if i == r.lo {
		for r.slots[r.lo].w == nil {
			r.lo++
		}
		// Whole blocks of tombstones before the head are sliced off, as a
		// slice-backed FIFO queue does: no copy, and append frees the
		// space when it next grows the array.
		if b := r.lo >> rosterShift; b > 0 {
			r.slots = r.slots[b<<rosterShift:]
			r.dead = r.dead[b:]
			r.lo -= b << rosterShift
		}
	}
	if len(r.slots)-r.lo-r.n > max(r.n, 64) {
		r.compact()
	}
}

// search returns the first slot at or after from whose seq is not below
// seq.
func (r *roster) search(from int, seq uint64) int {
	i, _ := slices.BinarySearchFunc(r.slots[from:], seq, func(s rosterSlot, seq uint64) int {
		return cmp.Compare(s.seq, seq)
	})
	return from + i
}

// find returns w's slot. Seqs are unique but for waiters that asked for a
// place (Request.Place) another holds: those stand side by side.
func (r *roster) find(w *waiter) int {
	i := r.search(r.lo, w.seq)
	for j := i; j < len(r.slots) && r.slots[j].seq == w.seq; j++ {
		if r.slots[j].w == w {
			return j
		}
	}
	return i
}

func (r *roster) reset() {
	r.slots, r.lo, r.n, r.dead = r.slots[:0], 0, 0, r.dead[:0]
}

// compact drops the tombstones after the head, and the memory of a roster
// that shrank.
func (r *roster) compact() {
	live := r.slots[:0]
	for _, s := range r.slots[r.lo:] {
		if s.w != nil {
			live = append(live, s)
		}
	}
	clear(r.slots[len(live):])
	if cap(live) > 1024 && len(live) < cap(live)/4 {
		live = append(make([]rosterSlot, 0, 2*len(live)), live...)
	}
	r.slots, r.lo = live, 0
	r.recount(0)
}

// recount counts the tombstones again from slot from's block on.
func (r *roster) recount(from int) {
	b := from >> rosterShift
	r.dead = r.dead[:b]
	for j := b << rosterShift; j < len(r.slots); j += rosterBlock {
		var d int32
		for _, s := range r.slots[j:min(j+rosterBlock, len(r.slots))] {
			if s.w == nil {
				d++
			}
		}
		r.dead = append(r.dead, d)
	}
}

// liveIn counts the members in slots [a, b), lo ≤ a ≤ b: the slots less
// the tombstones, counted per block and by walking at most the two partial
// blocks at the ends.
func (r *roster) liveIn(a, b int) int {
	if len(r.slots)-r.lo == r.n {
		return b - a // no tombstone from the head on
	}
	scan := func(a, b int) (d int) {
		for _, s := range r.slots[a:b] {
			if s.w == nil {
				d++
			}
		}
		return d
	}
	ba, bb := a>>rosterShift, b>>rosterShift
	if ba == bb {
		return b - a - scan(a, b)
	}
	d := scan(a, (ba+1)<<rosterShift) + scan(bb<<rosterShift, b)
	for _, n := range r.dead[ba+1 : bb] {
		d += int(n)
	}
	return b - a - d
}

// before counts the members that arrived before seq.
func (r *roster) before(seq uint64) int {
	switch {
	case r.n == 0 || r.slots[r.lo].seq >= seq:
		return 0
	case r.slots[len(r.slots)-1].seq < seq:
		return r.n // the common case of a later waiter: no search
	}
	return r.liveIn(r.lo, r.search(r.lo, seq))
}

// countWhile counts the members, in arrival order, before the first for
// which ok is false. ok must hold for a prefix of the members and fail for
// the rest; it is asked about O(log n) of them (more only where tombstones
// run long, and compaction keeps them fewer than members).
func (r *roster) countWhile(ok func(*waiter) bool) int {
	if r.n == 0 || !ok(r.slots[r.lo].w) {
		return 0
	}
	last := len(r.slots) - 1
	for r.slots[last].w == nil {
		last--
	}
	if ok(r.slots[last].w) {
		return r.n
	}
	// Every member in [lo, l) passes; every member in [h, len) fails.
	l, h := r.lo, len(r.slots)
	for l < h {
		mid := int(uint(l+h) >> 1)
		k := mid
		for k < h && r.slots[k].w == nil {
			k++
		}
		if k < h && ok(r.slots[k].w) {
			l = k + 1
		} else {
			h = mid
		}
	}
	return r.liveIn(r.lo, l)
}

// neighbors returns the members that arrived just before and just after w,
// a member; nil where there is none.
func (r *roster) neighbors(w *waiter) (prev, next *waiter) {
	i := r.find(w)
	for j := i - 1; j >= r.lo && prev == nil; j-- {
		prev = r.slots[j].w
	}
	for j := i + 1; j < len(r.slots) && next == nil; j++ {
		next = r.slots[j].w
	}
	return prev, next
}

// firstAfter returns the first member that arrived after seq, or nil.
func (r *roster) firstAfter(seq uint64) *waiter {
	if r.n == 0 {
		return nil
	}
	for j := r.search(r.lo, seq+1); j < len(r.slots); j++ {
		if w := r.slots[j].w; w != nil {
			return w
		}
	}
	return nil
}

// appendTo appends the members, in arrival order, to ws.
func (r *roster) appendTo(ws []*waiter) []*waiter {
	if r.n == 0 {
		return ws
	}
	for _, s := range r.slots[r.lo:] {
		if s.w != nil {
			ws = append(ws, s.w)
		}
	}
	return ws
}

// each calls f for every member in arrival order.
func (r *roster) each(f func(*waiter)) {
	if r.n == 0 {
		return
	}
	for _, s := range r.slots[r.lo:] {
		if s.w != nil {
			f(s.w)
		}
	}
}
