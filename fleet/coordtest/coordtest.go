// Package coordtest is the contract of the fleet's coordination
// (fleet.Coordination and fleet.NodeBoard), as a suite that every
// implementation runs from its own tests — PostgreSQL's store from
// package postgres, the in-memory fake from package fleet:
//
//	func TestCoordination(t *testing.T) {
//		coordtest.Exercise(t, func(t *testing.T) coordtest.Backend {
//			return coordtest.Backend{Store: newStore(t), Fence: fence}
//		})
//	}
//
// The suite speaks through fleet's own Coordinator, Elector and Board
// on the store, so what it checks is what the fleet relies on; the
// contract itself is in fleet's coordination.go. Beyond it:
//
// The term starts at epoch 0, ended. Of concurrent campaigners for an
// ended term exactly one wins, and every loser is told the winner's
// term. A deposed leader's renewals and forgets change nothing; so does
// a forget of a replica that heartbeated within the timeout, or of
// another generation. Registering an id again gives a newer generation,
// after a forget too, and fences the older one. A won campaign and a
// resignation are announced with their epoch, a renewal and a lost
// campaign are not, and a listener is told to read the term in full
// when it begins. A term is taken over early only while its leader's
// life session is not held. The secret is made once. A board offer is
// read by every replica but its own, younger than the TTL, until its
// replica leaves.
//
// Times are the store's, and real: the suite waits on the store's clock
// where the contract does (a term's expiry, a heartbeat's age), so a
// store on a fake clock must run it on the real one. Every store is
// fresh: each subtest asks for its own.
package coordtest

import (
	"context"
	"testing"
	"time"

	"github.com/weir-gateway/weir/fleet"
)

// Store is an implementation of the fleet's coordination under test.
type Store interface {
	fleet.Coordination
	fleet.NodeBoard
}

// Backend is one store under test, fresh, and what the suite needs
// beside it.
type Backend struct {
	Store Store
	// Fence opens a write fenced by leader's term of epoch, on the
	// store's own transactions (postgres.DB.TermFenceTx); nil skips the
	// fence's part of the suite.
	Fence func(ctx context.Context, leader string, epoch uint64) (FencedWrite, error)
}

// FencedWrite is a write fenced by a term, open until End.
type FencedWrite interface {
	// Held reports whether the fence held: the term was current, and
	// stays so until End.
	Held() bool
	// Waiting counts the campaigns that wait for this write to end.
	Waiting(ctx context.Context) (int, error)
	// End ends the write (commits it).
	End(ctx context.Context) error
}

// guard bounds every wait of the suite; it is a failure guard, never the
// thing waited for.
const guard = 10 * time.Second

// Exercise runs the suite, each test on a backend newBackend makes for it.
func Exercise(t *testing.T, newBackend func(t *testing.T) Backend) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T, func(*testing.T) Backend)
	}{
		{"FreshTerm", testFreshTerm},
		{"CampaignOneWinner", testCampaignOneWinner},
		{"DeposedLeaderIsRefused", testDeposedLeaderIsRefused},
		{"ForgetRefusesLiveReplica", testForgetRefusesLiveReplica},
		{"RegisterSupersedes", testRegisterSupersedes},
		{"LiveAndLapsed", testLiveAndLapsed},
		{"TermChangesAreNotified", testTermChangesAreNotified},
		{"RegisterPublishesWorkers", testRegisterPublishesWorkers},
		{"SecretIsMadeOnce", testSecretIsMadeOnce},
		{"RestartedReplicaTakesItsTerm", testRestartedReplicaTakesItsTerm},
		{"TakeOverOnlyWithoutLifeSession", testTakeOverOnlyWithoutLifeSession},
		{"LifeReportsRegistration", testLifeReportsRegistration},
		{"LifeHeldWhileHolding", testLifeHeldWhileHolding},
		{"FenceHoldsOffCampaign", testFenceHoldsOffCampaign},
		{"ElectorTakeoverOnCancel", testElectorTakeoverOnCancel},
		{"ElectorPausedStopsLeading", testElectorPausedStopsLeading},
		{"ElectorDeposedWhilePaused", testElectorDeposedWhilePaused},
		{"ElectorFenced", testElectorFenced},
		{"BoardOffersTheOtherReplicasNodes", testBoardOffersTheOtherReplicasNodes},
		{"BoardDropsLapsedOffers", testBoardDropsLapsedOffers},
		{"BoardTakesTheNewestOffer", testBoardTakesTheNewestOffer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newBackend)
		})
	}
}

// coord returns a Coordinator for replica id on store, with cfg's
// durations (zero: the defaults).
func coord(t *testing.T, store Store, id string, cfg fleet.CoordConfig) *fleet.Coordinator {
	t.Helper()
	cfg.Replica, cfg.Addr = id, id+".fleet:7000"
	c, err := fleet.NewCoordinator(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitFor polls cond until it holds, failing the test after guard. It is
// for conditions on the store's clock, which no local event announces.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(guard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, guard)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func current(t *testing.T, c *fleet.Coordinator) fleet.Term {
	t.Helper()
	term, err := c.Current(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return term
}

func ids(rs []fleet.Replica) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

// holdLife holds c's life session until the test ends or the returned
// release is called, and waits until the store reports it held.
func holdLife(t *testing.T, c *fleet.Coordinator) (release func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.HoldLife(ctx) }()
	released := false
	release = func() {
		if released {
			return
		}
		released = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("HoldLife: %v", err)
			}
		case <-time.After(guard):
			t.Error("HoldLife did not return when its context ended")
		}
	}
	t.Cleanup(release)
	waitFor(t, "the life session held", func() bool {
		_, held, err := c.Life(context.Background(), c.Replica(), c.Gen())
		return err == nil && held
	})
	return release
}
