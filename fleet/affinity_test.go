package fleet

import (
	"strings"
	"testing"

	"github.com/weir-gateway/weir/admission"
)

// TestShareAffinity: an affinity entry one replica shares reaches every
// other replica, the leader's own included, and not the replica that
// shared it; one past the bounds is not sent on.
func TestShareAffinity(t *testing.T) {
	t.Parallel()
	es := replicas(t, 3, admission.Options{})
	got := make([]chan AffinityEntry, len(es))
	for i, e := range es {
		ch := make(chan AffinityEntry, 16)
		got[i] = ch
		e.OnAffinity(func(entries []AffinityEntry) {
			for _, a := range entries {
				ch <- a
			}
		})
	}
	expect := func(i int, want AffinityEntry) {
		t.Helper()
		select {
		case a := <-got[i]:
			if a != want {
				t.Fatalf("replica %d learned %+v; want %+v", i, a, want)
			}
		case <-t.Context().Done():
			t.Fatalf("replica %d never learned %+v", i, want)
		}
	}
	// From a follower: the leader (in process) and the other follower.
	fromB := AffinityEntry{Key: "m\x00p:1", Target: "up/m"}
	es[1].ShareAffinity([]AffinityEntry{fromB, {Key: strings.Repeat("x", maxAffinityEntry), Target: "up/m"}})
	expect(0, fromB)
	expect(2, fromB)
	// From the leader: both followers.
	fromA := AffinityEntry{Key: "m\x00p:2", Target: "up2/m"}
	es[0].ShareAffinity([]AffinityEntry{fromA})
	expect(1, fromA)
	expect(2, fromA)
	// A marker after both: had the sharer or an oversized entry been
	// sent to anyone, it would come before it.
	mark := AffinityEntry{Key: "m\x00p:3", Target: "up/m"}
	es[2].ShareAffinity([]AffinityEntry{mark})
	expect(0, mark)
	expect(1, mark)
	if n := len(got[2]); n != 0 {
		t.Errorf("replica 2 learned %d entries of its own", n)
	}
}
