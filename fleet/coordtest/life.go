package coordtest

import (
	"context"
	"testing"
	"time"

	"github.com/weir-gateway/weir/fleet"
)

// testTakeOverOnlyWithoutLifeSession: a term that has not expired is
// taken early only while the store holds no life session of its leader's
// generation; otherwise TakeOver is an ordinary campaign, and loses.
func testTakeOverOnlyWithoutLifeSession(t *testing.T, newBackend func(*testing.T) Backend) {
	store := newBackend(t).Store
	ttl := fleet.CoordConfig{TermTTL: time.Minute}
	a, o := coord(t, store, "a", ttl), coord(t, store, "o", ttl)
	for _, c := range []*fleet.Coordinator{a, o} {
		if _, err := c.Register(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	release := holdLife(t, a)
	term, won, err := a.Campaign(t.Context())
	if err != nil || !won {
		t.Fatalf("a's campaign: %+v, %v, %v", term, won, err)
	}

	if got, won, err := o.TakeOver(t.Context(), term.Epoch); err != nil || won {
		t.Fatalf("TakeOver while a's life session is held: %+v, won %v, %v; want lost", got, won, err)
	}
	if _, won, err := o.TakeOver(t.Context(), term.Epoch+7); err != nil || won {
		t.Fatalf("TakeOver of another epoch: won %v, %v; want lost", won, err)
	}
	if rs, err := o.Live(t.Context()); err != nil || len(rs) != 2 || !rs[0].Session || rs[1].Session {
		t.Fatalf("Live: %+v, %v; want a with its session, o without", rs, err)
	}

	release()
	waitFor(t, "a's life session gone", func() bool {
		_, held, err := o.Life(t.Context(), "a", a.Gen())
		return err == nil && !held
	})
	if _, won, err := o.Campaign(t.Context()); err != nil || won {
		t.Fatalf("a plain campaign before the term expired: won %v, %v; want lost", won, err)
	}
	got, won, err := o.TakeOver(t.Context(), term.Epoch)
	if err != nil || !won || got.Epoch != term.Epoch+1 || got.Leader != "o" {
		t.Fatalf("TakeOver once a's life session is gone: %+v, won %v, %v; want epoch %d led by o", got, won, err, term.Epoch+1)
	}
}

// testLifeReportsRegistration: Life tells a registered replica's address
// and whether its session is held, and no address once it left.
func testLifeReportsRegistration(t *testing.T, newBackend func(*testing.T) Backend) {
	store := newBackend(t).Store
	a := coord(t, store, "a", fleet.CoordConfig{})
	if _, err := a.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	addr, held, err := a.Life(t.Context(), "a", a.Gen())
	if err != nil || addr != "a.fleet:7000" || held {
		t.Fatalf("before HoldLife: %q, %v, %v", addr, held, err)
	}
	holdLife(t, a)
	if addr, held, err = a.Life(t.Context(), "a", a.Gen()); err != nil || addr == "" || !held {
		t.Fatalf("with its session: %q, %v, %v", addr, held, err)
	}
	if err := a.Leave(t.Context()); err != nil {
		t.Fatal(err)
	}
	if addr, held, err = a.Life(t.Context(), "a", a.Gen()); err != nil || addr != "" || !held {
		t.Fatalf("after Leave: %q, %v, %v; want no address, the session still held", addr, held, err)
	}
}

// testLifeHeldWhileHolding: a life session is held while HoldLife runs,
// only for its own generation, and let go when it returns.
func testLifeHeldWhileHolding(t *testing.T, newBackend func(*testing.T) Backend) {
	store := newBackend(t).Store
	a := coord(t, store, "a", fleet.CoordConfig{})
	if err := a.HoldLife(t.Context()); err == nil {
		t.Fatal("HoldLife before Register: no error")
	}
	if _, err := a.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	release := holdLife(t, a)
	if _, held, err := a.Life(t.Context(), "a", a.Gen()+1); err != nil || held {
		t.Fatalf("another generation's session: held %v, %v; want not held", held, err)
	}
	release()
	waitFor(t, "the life session let go", func() bool {
		_, held, err := a.Life(context.Background(), "a", a.Gen())
		return err == nil && !held
	})
}
