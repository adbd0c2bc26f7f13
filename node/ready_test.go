package node

import (
	"strings"
	"testing"

	"github.com/weir-gateway/weir/edge/edgepb"
)

// setupReady is setup against a gateway that allows ready streams opened ahead
// and takes whole heads.
func setupReady(t *testing.T, ready int32, edit ...func(*Config)) *testBundle {
	t.Helper()
	return setupWith(t, func(g *fakeGateway) {
		g.ready.Store(ready)
		g.wholeHeads.Store(true)
	}, edit...)
}

// readyRun waits for the node's next Run stream opened ahead.
func (b *testBundle) readyRun(t *testing.T, gen uint64) *fakeRun {
	t.Helper()
	fr := b.gw.run(t)
	if !fr.open.Ready || fr.open.RunId != "" || fr.open.Generation != gen {
		t.Fatalf("a Run stream opened %v, want one opened ahead at generation %d", fr.open, gen)
	}
	return fr
}

// offerOn offers o on the ready stream fr.
func (fr *fakeRun) offerOn(o *edgepb.Offer) {
	fr.t.Helper()
	if err := fr.stream.Send(&edgepb.RunDown{Msg: &edgepb.RunDown_Offer{Offer: o}}); err != nil {
		fr.t.Fatalf("offer on a ready stream: %v", err)
	}
}

// TestReadyStreamsCarryRuns: the node opens as many Run streams ahead as
// the Welcome allows, and each carries the runs offered on it one after
// another: a plain answer whole in its head, a streamed one in chunks, a
// body inline or on the stream.
func TestReadyStreamsCarryRuns(t *testing.T) {
	t.Parallel()
	b := setupReady(t, 2)
	fs := b.gw.session(t)
	gen := fs.welcome.Generation
	fr := b.readyRun(t, gen)
	b.readyRun(t, gen)

	fr.offerOn(&edgepb.Offer{RunId: "run-1", Provider: "mock", Path: "/chat/completions", BodyInline: true, Body: chatBody(false)})
	a := fr.answer()
	if !a.complete || a.end != nil || a.head.Status != 200 || !strings.Contains(string(a.body), "chat.completion") {
		t.Fatalf("a plain answer: complete %v head %v end %v body %q", a.complete, a.head, a.end, a.body)
	}
	fr.offerOn(&edgepb.Offer{RunId: "run-2", Provider: "mock", Path: "/chat/completions", Stream: true})
	fr.sendBody(chatBody(true), 16)
	a = fr.answer()
	if a.complete || a.end.GetKind() != edgepb.RunEnd_COMPLETE || a.chunks == 0 || !strings.HasSuffix(string(a.body), "data: [DONE]\n\n") {
		t.Fatalf("a streamed answer: complete %v end %v chunks %d body %q", a.complete, a.end, a.chunks, a.body)
	}
	if st := b.mock.Stats(); st.Requests != 2 {
		t.Errorf("the runtime got %d requests, want 2", st.Requests)
	}
}

// TestReadyStreamRefusesOnIt: an offer the node cannot run, on a ready
// stream, is answered there with RunEnd ERROR, and the stream carries
// the next run.
func TestReadyStreamRefusesOnIt(t *testing.T) {
	t.Parallel()
	b := setupReady(t, 1)
	fs := b.gw.session(t)
	fr := b.readyRun(t, fs.welcome.Generation)
	for _, o := range []*edgepb.Offer{
		{RunId: "run-1", Provider: "nope", Path: "/chat/completions", BodyInline: true},
		{Provider: "mock", Path: "/chat/completions", BodyInline: true},
	} {
		fr.offerOn(o)
		if a := fr.answer(); a.head != nil || a.end.GetKind() != edgepb.RunEnd_ERROR {
			t.Fatalf("offer %v: head %v end %v, want RunEnd ERROR", o, a.head, a.end)
		}
	}
	fr.offerOn(&edgepb.Offer{RunId: "run-2", Provider: "mock", Path: "/chat/completions", BodyInline: true, Body: chatBody(false)})
	if a := fr.answer(); !a.complete || a.head.Status != 200 {
		t.Fatalf("the run after the refusals: head %v end %v", a.head, a.end)
	}
}

// TestReadyStreamCancel: a Cancel on a ready stream ends its run there
// (CANCELLED); the gateway ending a stream that carried a run has the
// node open another in its place.
func TestReadyStreamCancel(t *testing.T) {
	t.Parallel()
	b := setupReady(t, 1)
	arrived, ended := b.holdingRuntime()
	fs := b.gw.session(t)
	gen := fs.welcome.Generation
	fr := b.readyRun(t, gen)
	fr.offerOn(&edgepb.Offer{RunId: "run-1", Provider: "rt", Path: "/chat/completions", BodyInline: true, Body: chatBody(false)})
	wait(t, arrived, "the runtime's request")
	if err := fr.stream.Send(&edgepb.RunDown{Msg: &edgepb.RunDown_Cancel{Cancel: &edgepb.Cancel{RunId: "run-1", Reason: "client left"}}}); err != nil {
		t.Fatal(err)
	}
	wait(t, ended, "the runtime request's end")
	if a := fr.answer(); a.end.GetKind() != edgepb.RunEnd_CANCELLED {
		t.Fatalf("a cancelled run: end %v", a.end)
	}

	fr.offerOn(&edgepb.Offer{RunId: "run-2", Provider: "rt", Path: "/chat/completions", BodyInline: true, Body: chatBody(false)})
	wait(t, arrived, "the second runtime request")
	fr.done() // the gateway cuts the run short: its stream ends
	wait(t, ended, "the second runtime request's end")
	b.readyRun(t, gen)
}
