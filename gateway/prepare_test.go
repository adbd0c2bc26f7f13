package gateway

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/keys"
)

func TestParseWait(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"2s", 2 * time.Second, true},
		{"0", 0, true},
		{"-0", 0, true},
		{"0.5", 500 * time.Millisecond, true},
		{"1e6", 1e6 * time.Second, true},
		{"NaN", 0, false},
		{"nan", 0, false},
		{"-NaN", 0, false},
		{"Inf", 0, false},
		{"+Inf", 0, false},
		{"-Inf", 0, false},
		{"infinity", 0, false},
		{"1e400", 0, false},
		{"1000001", 0, false},
		{"-1", 0, false},
		{"-2s", 0, false},
		{"9999999999h", 0, false},
		{"", 0, false},
		{"soon", 0, false},
	} {
		got, err := parseWait(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseWait(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// prepareCatalog adds to the bundle's catalog a group "ops" that may run
// every mode and pin a platform (priority 5), and a video model "v".
func prepareCatalog(c *weir.Catalog) {
	c.Groups = append(c.Groups, weir.Group{Name: "ops", Priority: 5, RunModes: []weir.RunMode{weir.RunSimulation, weir.RunAcceptance}, PinPlatform: true})
	c.Models = append(c.Models, weir.Model{Name: "v", Kind: weir.KindVideo, Candidates: []weir.Candidate{{PlatformModel: "up/m", Weight: 1}}})
}

// TestPrepare: one request's policy, for a sync request and a task
// submission alike — each refusal in its category, naming the parameter
// at fault, and what a request that passes is granted.
func TestPrepare(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: prepareCatalog})
	ops := weir.APIKey{ID: "key_ops", Group: "ops"}
	plain := weir.APIKey{ID: "key_plain"}
	chat := Ask{Model: "m", Kind: weir.KindChat, DefaultMaxWait: time.Minute}
	with := func(f func(*Ask)) Ask { a := chat; f(&a); return a }
	for _, tc := range []struct {
		name  string
		key   weir.APIKey
		ask   Ask
		want  error // the category; nil: granted
		param string
	}{
		{"unknown model", plain, with(func(a *Ask) { a.Model = "nope" }), ErrNotFound, "model"},
		{"model not the key's", weir.APIKey{ID: "key_few", Models: []string{"v"}}, chat, ErrForbidden, "model"},
		{"wrong kind", plain, with(func(a *Ask) { a.Kind = weir.KindEmbeddings }), ErrInvalid, "model"},
		{"task of a chat model", plain, with(func(a *Ask) { a.Kind = "" }), nil, ""},
		{"bad priority", plain, with(func(a *Ask) { a.Priority = "high" }), ErrInvalid, ParamPriority},
		{"unknown run mode", plain, with(func(a *Ask) { a.RunMode = "dry" }), ErrInvalid, ParamRunMode},
		{"mode not the group's", plain, with(func(a *Ask) { a.RunMode = "simulation" }), ErrForbidden, ParamRunMode},
		{"run id without acceptance", ops, with(func(a *Ask) { a.RunID = "r1" }), ErrInvalid, ParamRunID},
		{"acceptance without run id", ops, with(func(a *Ask) { a.RunMode = "acceptance" }), ErrInvalid, ParamRunID},
		{"pin not the group's", plain, with(func(a *Ask) { a.Platform = "up" }), ErrForbidden, ParamPlatform},
		{"pin to no platform", ops, with(func(a *Ask) { a.Platform = "elsewhere" }), ErrInvalid, ParamPlatform},
		{"task pins", ops, Ask{Model: "v", Platform: "up"}, ErrInvalid, ParamPlatform},
		{"bad max wait", plain, with(func(a *Ask) { a.MaxWait = "soon" }), ErrInvalid, ParamMaxWait},
		{"chat", plain, chat, nil, ""},
		{"task", plain, Ask{Model: "v"}, nil, ""},
		{"pinned", ops, with(func(a *Ask) { a.Platform = "up2" }), nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.svc.Prepare(t.Context(), tc.key, tc.ask)
			var e *Error
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == nil:
			case !errors.Is(err, tc.want) || !errors.As(err, &e) || e.Param != tc.param:
				t.Fatalf("err %v (param %q), want %v naming %q", err, paramOf(err), tc.want, tc.param)
			}
		})
	}

	// What a request that passes is granted: the group's priority,
	// lowered by the request; its run; the shorter of the waits.
	g, err := b.svc.Prepare(t.Context(), ops, with(func(a *Ask) {
		a.Priority, a.RunMode, a.RunID, a.MaxWait = "9", "ACCEPTANCE", "r1", "2s"
	}))
	if err != nil {
		t.Fatal(err)
	}
	if g.Priority != 5 || g.RunMode != weir.RunAcceptance || g.RunID != "r1" || g.Group != "ops" || g.KeyID != "key_ops" ||
		g.MaxWait != 2*time.Second || g.MaxWaitAskedBy != ParamMaxWait || !g.Deadline.Equal(b.clock.Now().Add(2*time.Second)) {
		t.Errorf("granted %+v", g)
	}
	if g, _ := b.svc.Prepare(t.Context(), ops, with(func(a *Ask) { a.Priority, a.RunMode, a.RunID = "-3", "acceptance", "r1" })); g.Priority != -3 || g.MaxWait != weir.AcceptanceMaxWait {
		t.Errorf("an acceptance run's request with priority -3: granted priority %d, max wait %s", g.Priority, g.MaxWait)
	}
	if g, _ := b.svc.Prepare(t.Context(), plain, Ask{Model: "v"}); !g.Deadline.IsZero() {
		t.Errorf("a task that asks no wait has a deadline: %s", g.Deadline)
	}
	// The key's own scope is configured once a request of it is granted.
	if _, err := b.engine.Scope(t.Context(), weir.KeyScope("key_plain")); err != nil {
		t.Errorf("the key's scope after Prepare: %v", err)
	}
}

// TestPrepareUnservablePin: a pin to a platform that holds no candidate
// of the model is the client's to change (no_candidate, answered 400).
func TestPrepareUnservablePin(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) {
		prepareCatalog(c)
		c.Platforms = append(c.Platforms, weir.Platform{Name: "up3", Kind: "openai", BaseURL: c.Platforms[0].BaseURL})
	}})
	_, err := b.svc.Prepare(t.Context(), weir.APIKey{ID: "k", Group: "ops"}, Ask{Model: "m", Kind: weir.KindChat, Platform: "up3"})
	if code, client, _ := CodeOf(err); code != weir.CodeNoCandidate || !client || paramOf(err) != ParamPlatform {
		t.Errorf("err %v: code %s, client %v; want no_candidate, the client's", err, code, client)
	}
}

// TestPrepareBeforeCatalog: a gateway with no catalog yet refuses as
// no_candidate.
func TestPrepareBeforeCatalog(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	svc := New(Config{}, Deps{Engine: b.engine, Keys: b.store})
	if _, err := svc.Prepare(t.Context(), weir.APIKey{ID: "k"}, Ask{Model: "m", Kind: weir.KindChat}); !errors.Is(err, ErrNoCandidate) {
		t.Errorf("err %v, want no_candidate", err)
	}
}

func paramOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Param
	}
	return ""
}

// TestAuthenticate: a missing, unknown or revoked key is refused alike;
// an active one is found; a store that cannot answer is unavailable.
func TestAuthenticate(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	active := b.storeKey(t, weir.APIKey{ID: "key_on"})
	revoked := b.storeKey(t, weir.APIKey{ID: "key_off", RevokedAt: time.Now()})
	for _, secret := range []string{"", "sk-nobody", revoked} {
		if _, err := b.svc.Authenticate(t.Context(), secret); !errors.Is(err, ErrUnauthorized) {
			t.Errorf("secret %q: %v, want unauthorized", secret, err)
		}
	}
	if k, err := b.svc.Authenticate(t.Context(), active); err != nil || k.ID != "key_on" {
		t.Errorf("active key: %+v, %v", k, err)
	}
	down := New(Config{}, Deps{Engine: b.engine, Keys: failingKeys{}})
	_, err := down.Authenticate(t.Context(), active)
	if code, _, _ := CodeOf(err); code != weir.CodeStoreUnavailable {
		t.Errorf("store down: %v, want store_unavailable", err)
	}
}

// storeKey stores k and returns its secret.
func (b *testBundle) storeKey(t *testing.T, k weir.APIKey) string {
	t.Helper()
	secret, prefix, hash, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	k.Prefix, k.Hash, k.CreatedAt, k.Group = prefix, hash, time.Now(), "default"
	if err := b.store.KeyCreate(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	return secret
}

// failingKeys is a key store that cannot answer.
type failingKeys struct{}

func (failingKeys) KeyByHash(context.Context, string) (weir.APIKey, error) {
	return weir.APIKey{}, errors.New("connection refused")
}

func (failingKeys) KeyByID(context.Context, string) (weir.APIKey, error) {
	return weir.APIKey{}, errors.New("connection refused")
}
