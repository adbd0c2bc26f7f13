package gateway

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/provider"
)

// fakeNodes are edge nodes whose providers answer from a function.
type fakeNodes struct {
	mu      sync.Mutex
	models  []string // the models served, as "rt-"+model; nil: "m"
	serving []weir.NodeTarget
	answer  func(t weir.NodeTarget, c provider.Call) (*http.Response, error)
	calls   []string // the targets called, by name, with the body's model
	long    []bool   // whether each call held a long-context slot
}

func (f *fakeNodes) Serving(model string) []weir.NodeTarget {
	f.mu.Lock()
	defer f.mu.Unlock()
	if models := f.models; !(models == nil && model == "m") && !slices.Contains(models, model) {
		return nil
	}
	out := make([]weir.NodeTarget, len(f.serving))
	for i, t := range f.serving {
		t.Runtime = "rt-" + model
		out[i] = t
	}
	return out
}

func (f *fakeNodes) Do(ctx context.Context, t weir.NodeTarget, c provider.Call) (*http.Response, error) {
	f.mu.Lock()
	f.calls = append(f.calls, t.Name()+" "+string(c.Body))
	f.long = append(f.long, t.Long)
	answer := f.answer
	f.mu.Unlock()
	return answer(t, c)
}

func (f *fakeNodes) set(ts ...weir.NodeTarget) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.serving = ts
}

func okAnswer(weir.NodeTarget, provider.Call) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"id":"node","usage":{"prompt_tokens":1,"completion_tokens":1}}`))}, nil
}

// nodeTarget is node n's provider p serving "m" as runtime "rt-m", with
// its scope configured in b's engine at limit.
func (b *testBundle) nodeTarget(t *testing.T, n string, limit int64) weir.NodeTarget {
	t.Helper()
	nt := weir.NodeTarget{Node: n, Gen: 1, Provider: "p", Runtime: "rt-m"}
	if err := b.engine.SetScope(t.Context(), weir.NodeScope(n, "p"), admission.ScopeConfig{Limit: limit, Owner: weir.NodeOwner(n), OwnerGen: 1}); err != nil {
		t.Fatal(err)
	}
	return nt
}

// TestNodesFirst: a model's node provider is tried before its platform
// models, with the runtime's model name; the usage names the node.
func TestNodesFirst(t *testing.T) {
	t.Parallel()
	nodes := &fakeNodes{answer: okAnswer}
	b := setup(t, setupOpts{nodes: nodes})
	nodes.set(b.nodeTarget(t, "node_a", 1))
	c := b.chat(t)
	var out recordedAnswer
	if err := b.svc.Serve(t.Context(), c, &out); err != nil || out.head == nil || out.head.Status != 200 {
		t.Fatalf("serve: %v, head %+v", err, out.head)
	}
	if len(nodes.calls) != 1 || !strings.HasPrefix(nodes.calls[0], "node:node_a/p ") || !strings.Contains(nodes.calls[0], `"model":"rt-m"`) {
		t.Fatalf("node calls %q; want one to node_a's p with the runtime's model name", nodes.calls)
	}
	if c.Usage.PlatformModel != "node:node_a/p" {
		t.Errorf("usage names %q, want the node's provider", c.Usage.PlatformModel)
	}
	if st := b.scope(t, weir.NodeScope("node_a", "p")); st.Used != 0 {
		t.Errorf("the node's slot is still held: %+v", st)
	}
}

// TestNodeFailsOverToPlatform: a node that fails before any byte reached
// the client sends the request on to the platform models.
func TestNodeFailsOverToPlatform(t *testing.T) {
	t.Parallel()
	nodes := &fakeNodes{answer: func(weir.NodeTarget, provider.Call) (*http.Response, error) {
		return nil, &provider.Error{Err: errors.New("the node's session ended")}
	}}
	b := setup(t, setupOpts{nodes: nodes})
	nodes.set(b.nodeTarget(t, "node_a", 1))
	c := b.chat(t)
	var out recordedAnswer
	if err := b.svc.Serve(t.Context(), c, &out); err != nil || out.head == nil || out.head.Status != 200 {
		t.Fatalf("serve: %v, head %+v", err, out.head)
	}
	if len(nodes.calls) != 1 || c.Usage.PlatformModel != "up/m" {
		t.Fatalf("node calls %q, served by %q; want the node tried once, then up/m", nodes.calls, c.Usage.PlatformModel)
	}
}

// TestNodesLastAndNever: a model's nodes order puts its nodes after its
// platform models, or leaves them out.
func TestNodesLastAndNever(t *testing.T) {
	t.Parallel()
	for _, order := range []weir.NodesOrder{weir.NodesLast, weir.NodesNever} {
		nodes := &fakeNodes{answer: okAnswer}
		b := setup(t, setupOpts{nodes: nodes, catalog: func(c *weir.Catalog) { c.Models[0].Nodes = order }})
		nodes.set(b.nodeTarget(t, "node_a", 1))
		c := b.chat(t)
		var out recordedAnswer
		if err := b.svc.Serve(t.Context(), c, &out); err != nil {
			t.Fatalf("%s: %v", order, err)
		}
		if len(nodes.calls) != 0 || c.Usage.PlatformModel != "up/m" {
			t.Errorf("%s: node calls %q, served by %q; want up/m", order, nodes.calls, c.Usage.PlatformModel)
		}
	}
}

// TestLongPromptNeedsLongSlot: a prompt over a provider's threshold
// needs a long-context slot besides a slot; a short one does not.
func TestLongPromptNeedsLongSlot(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{nodes: &fakeNodes{answer: okAnswer}})
	c := b.chat(t)
	r := &routing{s: b.svc, c: c, tried: map[string]bool{}}
	nt := weir.NodeTarget{Node: "n", Provider: "p", LongPromptTokens: 100}
	for _, tc := range []struct {
		tokens, maxTokens int64
		long              bool
	}{{50, 0, false}, {150, 0, true}, {150, 100, false}} {
		c.Tokens, c.MaxTokens = tc.tokens, tc.maxTokens
		needs := r.candidates([]target{{node: &nt}})[0].Needs
		has := false
		for _, n := range needs {
			has = has || n.Scope == weir.NodeLongScope("n", "p")
		}
		if has != tc.long {
			t.Errorf("tokens %d (max_tokens %d): needs %+v; long slot wanted: %v", tc.tokens, tc.maxTokens, needs, tc.long)
		}
	}
}

// TestWaiterMovesToAnotherNode: a request queued on a node's full slots
// re-resolves when that node is fenced, and is served by the node that
// serves the model now, rather than failing or waiting out its deadline.
func TestWaiterMovesToAnotherNode(t *testing.T) {
	t.Parallel()
	nodes := &fakeNodes{answer: okAnswer}
	b := setup(t, setupOpts{nodes: nodes, catalog: func(c *weir.Catalog) {
		c.Models[0].Candidates = nil // served by nodes alone
	}})
	a := b.nodeTarget(t, "node_a", 1)
	other := b.nodeTarget(t, "node_b", 1)
	nodes.set(a)
	// node_a's one slot is taken.
	if _, err := b.engine.TryAcquire(t.Context(), admission.Request{ID: "busy", Owner: admission.Owner{ID: weir.NodeOwner("node_a"), Gen: 1},
		Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: weir.NodeScope("node_a", "p"), Amount: 1}}}}}); err != nil {
		t.Fatal(err)
	}
	c := b.chat(t)
	done := make(chan error, 1)
	var out recordedAnswer
	go func() { done <- b.svc.Serve(t.Context(), c, &out) }()
	b.waitEvent(t, admission.OutcomeQueued)
	// node_a goes; node_b now serves the model.
	nodes.set(other)
	if err := b.engine.Fence(t.Context(), weir.NodeOwner("node_a"), 1); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || c.Usage.PlatformModel != "node:node_b/p" {
		t.Fatalf("serve: %v, served by %q; want node_b", err, c.Usage.PlatformModel)
	}
}

// TestNodeGoneIsNoCandidate: a request whose only candidate is a node
// that turned out gone before the call reached it has no candidate, not
// a failed upstream.
func TestNodeGoneIsNoCandidate(t *testing.T) {
	t.Parallel()
	nodes := &fakeNodes{answer: func(weir.NodeTarget, provider.Call) (*http.Response, error) {
		return nil, &provider.Error{Err: weir.ErrNodeGone}
	}}
	b := setup(t, setupOpts{nodes: nodes, catalog: func(c *weir.Catalog) { c.Models[0].Candidates = nil }})
	nodes.set(b.nodeTarget(t, "node_a", 1))
	var out recordedAnswer
	err := b.svc.Serve(t.Context(), b.chat(t), &out)
	if !errors.Is(err, ErrNoCandidate) {
		t.Fatalf("serve: %v, want no_candidate", err)
	}
}

// TestNodeCooldownIsTheSessions: failures that put a node's session into
// cooldown leave its next session (a newer generation) untouched.
func TestNodeCooldownIsTheSessions(t *testing.T) {
	t.Parallel()
	nodes := &fakeNodes{answer: okAnswer}
	b := setup(t, setupOpts{nodes: nodes, catalog: func(c *weir.Catalog) { c.Models[0].Candidates = nil }})
	old := b.nodeTarget(t, "node_a", 1)
	for range 3 {
		b.svc.deps.Router.Failure(nodeHealth(old))
	}
	nodes.set(old)
	var out recordedAnswer
	if err := b.svc.Serve(t.Context(), b.chat(t), &out); !errors.Is(err, ErrNoCandidate) {
		t.Fatalf("a cooling session's only candidate: %v, want no_candidate", err)
	}
	next := old
	next.Gen = 2
	if err := b.engine.SetScope(t.Context(), weir.NodeScope("node_a", "p"), admission.ScopeConfig{Limit: 1, Owner: weir.NodeOwner("node_a"), OwnerGen: 2}); err != nil {
		t.Fatal(err)
	}
	nodes.set(next)
	if err := b.svc.Serve(t.Context(), b.chat(t), &out); err != nil {
		t.Fatalf("the node's next session: %v", err)
	}
}

// chatOf is b.chat on model, with its own request id and content.
func (b *testBundle) chatOf(t *testing.T, model, id, content string) *Call {
	t.Helper()
	c := b.chat(t)
	m, ok := c.Snapshot.Model(model)
	if !ok {
		t.Fatalf("no model %s", model)
	}
	c.Model, c.RequestID = m, id
	c.Body = rawBody(`{"model":"m","messages":[{"role":"user","content":"` + content + `"}]}`)
	return c
}

// TestLongPromptsWaitShortOnesFlow: with a node's long-context slot
// taken, a long prompt waits for it while short prompts keep being
// served from the other slots; the long one is served once the long
// slot is free.
func TestLongPromptsWaitShortOnesFlow(t *testing.T) {
	t.Parallel()
	nodes := &fakeNodes{answer: okAnswer}
	b := setup(t, setupOpts{nodes: nodes, catalog: func(c *weir.Catalog) { c.Models[0].Candidates = nil }})
	nt := b.nodeTarget(t, "node_a", 3)
	nt.LongPromptTokens = 100
	if err := b.engine.SetScope(t.Context(), weir.NodeLongScope("node_a", "p"), admission.ScopeConfig{Limit: 1, Owner: weir.NodeOwner("node_a"), OwnerGen: 1}); err != nil {
		t.Fatal(err)
	}
	nodes.set(nt)
	busy, err := b.engine.TryAcquire(t.Context(), admission.Request{ID: "long-running", Candidates: []admission.Candidate{{Needs: []admission.Need{
		{Scope: weir.NodeScope("node_a", "p"), Amount: 1}, {Scope: weir.NodeLongScope("node_a", "p"), Amount: 1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	long := b.chatOf(t, "m", "req_long", "long")
	long.Tokens = 500
	longDone := b.serveAsync(t.Context(), long, &recordedAnswer{})
	b.waitEvent(t, admission.OutcomeQueued)
	for i := range 5 {
		short := b.chatOf(t, "m", fmt.Sprintf("req_short_%d", i), "short")
		if err := <-b.serveAsync(t.Context(), short, &recordedAnswer{}); err != nil || short.Usage.PlatformModel != "node:node_a/p" {
			t.Fatalf("short prompt %d beside a waiting long one: %v, served by %q", i, err, short.Usage.PlatformModel)
		}
	}
	select {
	case err := <-longDone:
		t.Fatalf("the long prompt was served (%v) while the long slot was taken", err)
	default:
	}
	if err := b.engine.Release(t.Context(), busy.ID, admission.Owner{}); err != nil {
		t.Fatal(err)
	}
	if err := <-longDone; err != nil || long.Usage.PlatformModel != "node:node_a/p" {
		t.Fatalf("the long prompt once the long slot was free: %v, served by %q", err, long.Usage.PlatformModel)
	}
	// The node is told which runs hold a long slot (it counts them).
	nodes.mu.Lock()
	defer nodes.mu.Unlock()
	if n := len(nodes.long); n != 6 || slices.Contains(nodes.long[:5], true) || !nodes.long[5] {
		t.Errorf("calls' long flags %v; want five short, then the long one", nodes.long)
	}
}

// TestModelsShareNodeInArrivalOrder: requests for two models that one
// node provider serves queue on its slot as one line: they are served
// in the order they arrived, whatever their model.
func TestModelsShareNodeInArrivalOrder(t *testing.T) {
	t.Parallel()
	nodes := &fakeNodes{answer: okAnswer, models: []string{"m", "m2"}}
	b := setup(t, setupOpts{nodes: nodes, catalog: func(c *weir.Catalog) {
		c.Models[0].Candidates = nil
		c.Models = append(c.Models, weir.Model{Name: "m2", Kind: weir.KindChat})
	}})
	nodes.set(b.nodeTarget(t, "node_a", 1))
	busy, err := b.engine.TryAcquire(t.Context(), admission.Request{ID: "running", Candidates: []admission.Candidate{{Needs: []admission.Need{
		{Scope: weir.NodeScope("node_a", "p"), Amount: 1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	var done []<-chan error
	for i := range 8 {
		model := []string{"m", "m2"}[i%2]
		content := fmt.Sprintf("%s-%d", model, i)
		want = append(want, content)
		done = append(done, b.serveAsync(t.Context(), b.chatOf(t, model, "req_"+content, content), &recordedAnswer{}))
		b.waitEvent(t, admission.OutcomeQueued)
	}
	if err := b.engine.Release(t.Context(), busy.ID, admission.Owner{}); err != nil {
		t.Fatal(err)
	}
	for i, ch := range done {
		if err := <-ch; err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	nodes.mu.Lock()
	defer nodes.mu.Unlock()
	var got []string
	for _, c := range nodes.calls {
		for _, w := range want {
			if strings.Contains(c, `"content":"`+w+`"`) {
				got = append(got, w)
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("served in the order %v; want the arrival order %v", got, want)
	}
}

// TestStalledNodeRunHandsOff: a request whose run stalled on a node,
// before any of its answer reached the client, moves to the next
// candidate, and its usage record and the log say it was handed off,
// and from where; a request that failed over for another cause carries
// no such mark.
func TestStalledNodeRunHandsOff(t *testing.T) {
	t.Parallel()
	nodes := &fakeNodes{answer: func(nt weir.NodeTarget, c provider.Call) (*http.Response, error) {
		switch nt.Node {
		case "node_a":
			return nil, &provider.Error{Timeout: true, Err: fmt.Errorf("node_a's provider p: %w: no progress for 30s", weir.ErrNodeStalled)}
		case "node_b":
			return nil, &provider.Error{Status: 503}
		}
		return okAnswer(nt, c)
	}}
	b := setup(t, setupOpts{nodes: nodes, catalog: func(c *weir.Catalog) { c.Models[0].Candidates = nil }})
	nodes.set(b.nodeTarget(t, "node_a", 1), b.nodeTarget(t, "node_c", 1))
	c := b.chat(t)
	var out recordedAnswer
	if err := b.svc.Serve(t.Context(), c, &out); err != nil || c.Usage.PlatformModel != "node:node_c/p" {
		t.Fatalf("serve: %v, served by %q; want node_c", err, c.Usage.PlatformModel)
	}
	if c.Usage.Handoff != "stalled node:node_a/p" {
		t.Errorf("usage's handoff %q, want the stall on node_a's p", c.Usage.Handoff)
	}
	if l := b.logs.String(); !strings.Contains(l, `"handoff":"stalled","node":"node_a"`) {
		t.Errorf("the log does not mark the handoff: %s", l)
	}

	nodes.set(b.nodeTarget(t, "node_b", 1), b.nodeTarget(t, "node_c", 1))
	c = b.chat(t)
	if err := b.svc.Serve(t.Context(), c, &out); err != nil || c.Usage.PlatformModel != "node:node_c/p" || c.Usage.Handoff != "" {
		t.Errorf("a failover for a 503: %v, served by %q, handoff %q; want node_c, no handoff", err, c.Usage.PlatformModel, c.Usage.Handoff)
	}
}

// uploadBody is an Uploader: a form with its model and a file, a
// transcription's (field "" is "file") or an image's ("image").
type uploadBody struct{ field string }

func (uploadBody) WithModel(string) ([]byte, error) { return nil, errors.New("not JSON") }

func (u uploadBody) Upload(upstream string) (*provider.Upload, error) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	_ = mw.WriteField("model", upstream)
	if u.field == "image" {
		_ = mw.WriteField("prompt", "a hat")
	}
	fw, _ := mw.CreateFormFile(cmp.Or(u.field, "file"), "a.wav")
	_, _ = fw.Write([]byte("audio"))
	_ = mw.Close()
	return &provider.Upload{Body: io.NopCloser(&b), ContentType: mw.FormDataContentType(), Length: int64(b.Len()), Model: upstream}, nil
}

// TestUploadSkipsNodes: an upload goes to the platform models even when
// the model's nodes come first: a node's tunnel carries JSON.
func TestUploadSkipsNodes(t *testing.T) {
	t.Parallel()
	nodes := &fakeNodes{answer: okAnswer}
	b := setup(t, setupOpts{nodes: nodes})
	nodes.set(b.nodeTarget(t, "node_a", 1))
	c := b.chat(t)
	c.Path, c.Body = "/audio/transcriptions", uploadBody{}
	var out recordedAnswer
	if err := b.svc.Serve(t.Context(), c, &out); err != nil || out.head == nil || out.head.Status != 200 {
		t.Fatalf("serve: %v, head %+v", err, out.head)
	}
	if len(nodes.calls) != 0 || !strings.Contains(out.body.String(), "mock transcript of a.wav: 5 bytes") {
		t.Fatalf("node calls %q, answer %s; want the platform's transcript", nodes.calls, out.body.String())
	}
}

// TestUploadSkipsAPlatformLackingItsEndpoint: an azure platform serves
// image edits but not variations, so a variation goes to the model's
// other candidate, or is refused when there is none.
func TestUploadSkipsAPlatformLackingItsEndpoint(t *testing.T) {
	t.Parallel()
	images := func(c *weir.Catalog) {
		c.Platforms[0] = weir.Platform{Name: "up", Kind: "azure", APIKey: "k", BaseURL: strings.TrimSuffix(c.Platforms[1].BaseURL, "/v1")}
		c.Models[0].Kind = weir.KindImages
	}
	b := setup(t, setupOpts{catalog: images})
	for path, want := range map[string]string{"/images/edits": "up/m", "/images/variations": "up2/m"} {
		c := b.chat(t)
		c.Path, c.Body = path, uploadBody{field: "image"}
		var out recordedAnswer
		if err := b.svc.Serve(t.Context(), c, &out); err != nil || out.head == nil || out.head.Status != 200 {
			t.Fatalf("%s: %v, head %+v", path, err, out.head)
		}
		if c.Usage.PlatformModel != want {
			t.Fatalf("%s: served by %s; want %s", path, c.Usage.PlatformModel, want)
		}
	}

	b = setup(t, setupOpts{catalog: func(c *weir.Catalog) { images(c); onlyUp(c) }})
	c := b.chat(t)
	c.Path, c.Body = "/images/variations", uploadBody{field: "image"}
	err := b.svc.Serve(t.Context(), c, &recordedAnswer{})
	var e *Error
	if !errors.As(err, &e) || e.Category != ErrUnservable || !strings.Contains(e.Message, "lack that endpoint") {
		t.Fatalf("a variation with only an azure candidate: %v; want unservable", err)
	}
}

// upstreamOf sends a call to what its platform model names, each call's
// own native and tokenizer set on it, and the snapshot's record of the
// platform model left as it was.
func TestUpstreamOfPlatformModel(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: func(cat *weir.Catalog) {
		cat.Platforms = append(cat.Platforms, weir.Platform{Name: "an", Kind: "anthropic", BaseURL: cat.Platforms[0].BaseURL})
		cat.PlatformModels = append(cat.PlatformModels, weir.PlatformModel{Name: "an/m", Platform: "an", Upstream: "claude-x",
			Price: weir.Price{Input: 3}, Supports: weir.Capabilities{MaxOutputTokens: 64}})
	}})
	st := b.svc.Snapshot()
	c := b.chat(t)
	want := func(name, platform, upstreamName, prov string, price weir.Price, maxOutput int64, native bool) upstream {
		return upstream{Name: name, Platform: platform, Upstream: upstreamName, ex: st.Adapter(platform), health: name, pausable: true,
			native: native, price: price, maxOutput: maxOutput, tokenizer: weir.TokenizerEstimate, provider: prov, responseModel: upstreamName}
	}
	c.Native = &Native{API: APIResponses}
	if got, w := b.svc.upstreamOf(c, target{pm: "up/m"}), want("up/m", "up", "gpt-4o-mini", "openai", weir.Price{}, 0, true); !reflect.DeepEqual(got, w) {
		t.Errorf("a Responses call to up/m:\n got %+v\nwant %+v", got, w)
	}
	c.Native = &Native{API: APIMessages}
	if got, w := b.svc.upstreamOf(c, target{pm: "an/m"}), want("an/m", "an", "claude-x", "anthropic", weir.Price{Input: 3}, 64, true); !reflect.DeepEqual(got, w) {
		t.Errorf("a Messages call to an/m:\n got %+v\nwant %+v", got, w)
	}
	c.Native = nil
	if got, w := b.svc.upstreamOf(c, target{pm: "up/m"}), want("up/m", "up", "gpt-4o-mini", "openai", weir.Price{}, 0, false); !reflect.DeepEqual(got, w) {
		t.Errorf("a Chat Completions call to up/m:\n got %+v\nwant %+v", got, w)
	}
	if got := b.svc.upstreamOf(c, target{pm: "gone/m"}); got.Name != "" || got.ex != nil || !got.pausable || got.responseModel != OtherModel {
		t.Errorf("a platform model not in the catalog: %+v", got)
	}
}
