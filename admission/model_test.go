package admission_test

// TestModel and FuzzEngine run random operation sequences against the memory
// engine and check every step against the reference model of package
// admissiontest (admissiontest/model_state.go lists what is checked).
//
//	go test -race -run TestModel ./admission/                           # 10^5 operations over 8 seeds
//	go test -run TestModel ./admission/ -admission.ops=1000000          # 10^6
//	go test -run TestModel ./admission/ -admission.seed=3               # one seed
//	go test -run XXX -fuzz FuzzEngine -fuzztime 60s ./admission/        # fuzz bytes as operations
//	go test -run TestModel ./admission/ -admission.lenient              # past known engine deviations
//
// (The -admission flags go after the package: go test hands flags it does
// not know, and everything after them, to the test binary.)

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/admission/admissiontest"
)

var (
	flagOps   = flag.Int("admission.ops", 100_000, "operations TestModel runs in all, split over its seeds")
	flagSeeds = flag.Int("admission.seeds", 8, "seeds TestModel splits its operations over")
	flagSeed  = flag.Uint64("admission.seed", 0, "run TestModel with this seed only (its share of -admission.ops)")
	// flagLenient tolerates engine behaviour the model reports as contract
	// violations but that is known and not yet settled, so that a long run
	// can look for other problems.
	flagLenient = flag.Bool("admission.lenient", false, "follow the engine where it deviates from the contract in known ways (see model.lenient in admissiontest)")
)

func newMemory(t *testing.T, opts admission.Options) admission.Engine {
	m := admission.NewMemory(opts)
	t.Cleanup(m.Close)
	return m
}

// positionByScan is the model's oracle for Position.
func positionByScan(e admission.Engine, waiterID string) (admission.Position, error) {
	m, ok := e.(*admission.Memory)
	if !ok {
		return admission.Position{}, fmt.Errorf("positionByScan: %T is not the memory engine", e)
	}
	return admission.PositionByScan(m, waiterID)
}

func TestModel(t *testing.T) {
	admissiontest.Model(t, newMemory, admissiontest.ModelConfig{
		Ops: *flagOps, Seeds: max(*flagSeeds, 1), Seed: *flagSeed, Lenient: *flagLenient,
		Rerun: "go test -race -run TestModel ./admission/", FlagPrefix: "admission",
		PositionScan: positionByScan,
	})
}

func FuzzEngine(f *testing.F) {
	// Failures tend to need a few thousand operations, so the seeds are
	// long (an operation takes 5–30 bytes) and the fuzzer mutates runs of
	// that length.
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 0xf022))
		data := make([]byte, 512<<(2*seed))
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		admissiontest.ModelInput(t, newMemory, data, admissiontest.ModelConfig{
			Lenient:      *flagLenient,
			Rerun:        "go test -run FuzzEngine/<name> ./admission/ (the input is saved under testdata/fuzz/FuzzEngine)",
			PositionScan: positionByScan,
		})
	})
}
