package gateway

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/weir-gateway/weir"
)

// sharedAffinity links the affinity tables of replicas in one test, as a
// fleet's sessions do: what one shares, the others learn at once.
type sharedAffinity struct {
	mu    sync.Mutex
	learn []func(key, target string)
	// shared counts the entries shared.
	shared int
}

// replica is the AffinityShare of the replica of index i.
func (s *sharedAffinity) replica(i int) AffinityShare { return shareOf{s, i} }

type shareOf struct {
	s *sharedAffinity
	i int
}

func (r shareOf) ShareAffinity(key, target string) {
	r.s.mu.Lock()
	r.s.shared++
	learn := append([]func(string, string){}, r.s.learn...)
	r.s.mu.Unlock()
	for j, f := range learn {
		if j != r.i && f != nil {
			f(key, target)
		}
	}
}

func (r shareOf) OnAffinity(f func(key, target string)) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	for len(r.s.learn) <= r.i {
		r.s.learn = append(r.s.learn, nil)
	}
	r.s.learn[r.i] = f
}

// spreadAffinity is the catalog of the fleet's affinity tests: model m
// prefers its last candidate, over two of equal priority the router
// spreads.
func spreadAffinity(c *weir.Catalog) {
	c.Models[0].Affinity = weir.AffinityPrefer
	c.Models[0].Candidates[0].Priority = c.Models[0].Candidates[1].Priority
}

// affinityRun sends each prefix's requests to the replicas in turn (a
// balancer's round robin, with the prefixes interleaved), and returns the fleet's hit rate: the share
// of requests, after each prefix's first, served where the request
// before it with that prefix was, on whichever replica.
func affinityRun(t *testing.T, bs []*testBundle, prefixes, each int) float64 {
	t.Helper()
	last := make(map[string]string)
	hits, total := 0, 0
	for i := range each {
		for p := range prefixes {
			b := bs[(i+p)%len(bs)]
			key := fmt.Sprintf("p:%d", p)
			c := b.chatAff(t, fmt.Sprintf("req_%d_%d", p, i), key)
			if err := b.svc.Serve(t.Context(), c, &recordedAnswer{}); err != nil {
				t.Fatalf("serve: %v", err)
			}
			if prev, ok := last[key]; ok {
				total++
				if prev == c.Usage.PlatformModel {
					hits++
				}
			}
			last[key] = c.Usage.PlatformModel
		}
	}
	return float64(hits) / float64(total)
}

// TestAffinityAcrossReplicas: with requests sharing prefixes spread over
// two replicas in turn, the fleet's hit rate is as one replica's when
// the replicas share their tables; each replica alone reaches the
// candidate its own table remembers, which the other replica's requests
// moved meanwhile about half the time.
func TestAffinityAcrossReplicas(t *testing.T) {
	t.Parallel()
	const prefixes, each = 40, 10
	newReplicas := func(n int, share *sharedAffinity) []*testBundle {
		var bs []*testBundle
		for i := range n {
			var o setupOpts
			o.catalog = spreadAffinity
			if share != nil {
				o.affinity = share.replica(i)
			}
			b := setup(t, o)
			b.setExec("up", okExec)
			b.setExec("up2", okExec)
			bs = append(bs, b)
		}
		return bs
	}
	one := affinityRun(t, newReplicas(1, nil), prefixes, each)
	alone := affinityRun(t, newReplicas(2, nil), prefixes, each)
	share := &sharedAffinity{}
	shared := affinityRun(t, newReplicas(2, share), prefixes, each)
	t.Logf("fleet hit rate: 1 replica %.0f%%, 2 replicas each alone %.0f%%, 2 replicas sharing %.0f%% (%d entries shared for %d requests)",
		100*one, 100*alone, 100*shared, share.shared, prefixes*each)
	if shared < 0.95 || shared < one-0.05 {
		t.Errorf("2 replicas sharing: hit rate %.0f%%; want at least 95%%, as 1 replica's %.0f%%", 100*shared, 100*one)
	}
	if share.shared > prefixes*2 {
		t.Errorf("%d entries shared for %d prefixes on one candidate each; want one a prefix, or a few more", share.shared, prefixes)
	}
}

// TestTaskAffinity: a task of a model with affinity on is planned first
// on the platform model its affinity key last started on, whatever the
// router's order; the replicas share it; another key, or a model with
// affinity off, keeps the router's order.
func TestTaskAffinity(t *testing.T) {
	t.Parallel()
	twoVideo := func(a weir.Affinity) func(*weir.Catalog) {
		return func(c *weir.Catalog) {
			c.PlatformModels = append(c.PlatformModels,
				weir.PlatformModel{Name: "up/v", Platform: "up", Upstream: "sora-2"},
				weir.PlatformModel{Name: "up2/v", Platform: "up2", Upstream: "sora-2"})
			c.Models = append(c.Models, weir.Model{Name: "v", Kind: weir.KindVideo, Affinity: a, Candidates: []weir.Candidate{
				{PlatformModel: "up/v", Priority: 2, Weight: 1}, {PlatformModel: "up2/v", Priority: 1, Weight: 1}}})
		}
	}
	share := &sharedAffinity{}
	a := setup(t, setupOpts{catalog: twoVideo(weir.AffinityPrefer), affinity: share.replica(0)})
	b := setup(t, setupOpts{catalog: twoVideo(weir.AffinityPrefer), affinity: share.replica(1)})
	off := setup(t, setupOpts{catalog: twoVideo(weir.AffinityOff)})
	first := func(b *testBundle, input string) string {
		t.Helper()
		ctx := t.Context()
		if err := b.store.KeyCreate(ctx, weir.APIKey{ID: "key_v", Hash: "hash_v", CreatedAt: b.clock.Now()}); err != nil && !errors.Is(err, weir.ErrConflict) {
			t.Fatal(err)
		}
		cands, err := b.svc.Plan(ctx, weir.Task{ID: "task_1", Model: "v", KeyID: "key_v", Input: []byte(input)})
		if err != nil {
			t.Fatal(err)
		}
		needs := cands[0].Needs
		return needs[len(needs)-1].Scope
	}
	started := weir.Task{Model: "v", PlatformModel: "up2/v", Input: []byte(`{"prompt":"a cat"}`)}
	a.svc.TaskStarted(started)
	off.svc.TaskStarted(started)
	for _, tc := range []struct {
		name  string
		b     *testBundle
		input string
		want  string
	}{
		{"same prompt", a, `{"prompt":"a cat"}`, weir.PlatformModelScope("up2/v")},
		{"same prompt, the other replica", b, `{"prompt":"a cat","seconds":"8"}`, weir.PlatformModelScope("up2/v")},
		{"another prompt", a, `{"prompt":"a dog"}`, weir.PlatformModelScope("up/v")},
		{"affinity off", off, `{"prompt":"a cat"}`, weir.PlatformModelScope("up/v")},
	} {
		if got := first(tc.b, tc.input); got != tc.want {
			t.Errorf("%s: first candidate on %s; want %s", tc.name, got, tc.want)
		}
	}
}
