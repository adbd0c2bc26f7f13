package fleet

import (
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/admission/admissiontest"
	"github.com/weir-gateway/weir/clock"
)

// What the external tests (package fleet_test) use of this package's
// tests: they run the fleet on PostgreSQL's store, and the
// coordination's suite on the in-memory one, neither of which this
// package's own tests can import (both import fleet).

// Spread is an admission.Engine whose calls go to each of es in turn
// (spread).
func Spread(es []*Engine) admission.Engine {
	return &spread{es: es, holders: make(map[admission.LeaseID]*Engine), waiters: make(map[string]*Engine)}
}

// ModelFlags is the model's configuration from the -fleet flags, with
// rerun as the command that runs it again.
func ModelFlags(rerun string) admissiontest.ModelConfig {
	return admissiontest.ModelConfig{Ops: *flagOps, Seeds: max(*flagSeeds, 1), Seed: *flagSeed, Lenient: *flagLenient,
		Rerun: rerun, FlagPrefix: "fleet"}
}

// MemStore is the in-memory coordination (memStore).
type MemStore = memStore

// NewMemStore returns an empty MemStore on c.
func NewMemStore(c clock.Clock) *MemStore { return newMemStore(c) }

// MemFenceWrite opens a write on s fenced by leader's term of epoch
// (memStore.fenceWrite).
func MemFenceWrite(s *MemStore, leader string, epoch uint64) (held bool, end func()) {
	return s.fenceWrite(leader, epoch)
}

// MemWaiting counts the campaigns on s waiting for a fenced write.
func MemWaiting(s *MemStore) int { return int(s.waiting.Load()) }
