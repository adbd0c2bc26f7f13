package gateway

import (
	"fmt"
	"testing"

	"github.com/weir-gateway/weir"
)

func money(t testing.TB, s string) weir.Money {
	t.Helper()
	m, err := weir.ParseMoney(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// priced gives up/m a price: 1.00 per million prompt tokens, 0.50 per
// million cached, 2.00 per million completion tokens, images by size.
func priced(t testing.TB) func(*weir.Catalog) {
	return func(c *weir.Catalog) {
		onlyUp(c)
		c.PlatformModels[0].Price = weir.Price{Input: money(t, "1"), CachedInput: money(t, "0.5"), Output: money(t, "2"),
			Images: map[string]weir.Money{"1024x1024": money(t, "0.04"), "*": money(t, "0.08")}, Characters: money(t, "15")}
	}
}

// serveChat serves a chat of body on b's model and returns its call.
func serveChat(t *testing.T, b *testBundle, body string) *Call {
	t.Helper()
	c := b.chat(t)
	c.Body = rawBody(body)
	c.Wants = weir.Wants{PromptTokens: 10, MaxTokens: 100}
	if err := b.svc.Serve(t.Context(), c, &recordedAnswer{}); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	return c
}

// TestCostOfReportedUsage: a request is priced from the usage its
// upstream reports, whatever it was estimated at, the cached part of the
// prompt at the cached price; each request at its own usage.
func TestCostOfReportedUsage(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: priced(t)})
	var sum weir.Money
	for i := range 5 {
		prompt, cached, completion := 1000*(i+1), 400*i, 50*(i+3)
		c := serveChat(t, b, fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":100,`+
			`"metadata":{"mock_usage":"prompt=%d,cached=%d,completion=%d"}}`, prompt, cached, completion))
		want := weir.Money(int64(prompt-cached)*1000 + int64(cached)*500 + int64(completion)*2000)
		cost, estimated := c.Cost()
		if cost != want || estimated || c.Usage.CachedTokens != int64(cached) || c.Usage.PromptTokens != int64(prompt) {
			t.Errorf("request %d: cost %s (estimated %v), usage %+v; want %s measured, %d cached", i, cost, estimated, c.Usage, want, cached)
		}
		if cost == c.Estimate("up/m") {
			t.Errorf("request %d: cost %s is the estimate", i, cost)
		}
		sum = sum.Add(cost)
	}
	if sum.String() != "0.0155" {
		t.Errorf("five requests cost %s", sum)
	}
}

// TestCostWithoutUsage: an answer that reports no usage costs the
// request's estimate, and the record says so; a stream without a usage
// chunk costs the gateway's own count, also said to be estimated.
func TestCostWithoutUsage(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: priced(t)})
	c := serveChat(t, b, `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":100,"metadata":{"mock_usage":"none"}}`)
	cost, estimated := c.Cost()
	if want := c.Estimate("up/m"); cost != want || !estimated || want.String() != "0.00021" {
		t.Errorf("no usage: cost %s estimated %v; want the estimate %s (0.00021), estimated", cost, estimated, want)
	}

	c = b.chat(t)
	c.Body, c.Stream, c.Tokens, c.MaxTokens = rawBody(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`), true, 1010, 1000
	if err := b.svc.Serve(t.Context(), c, &recordedAnswer{}); err != nil {
		t.Fatal(err)
	}
	cost, estimated = c.Cost()
	chunks := c.Usage.CompletionTokens
	if want := weir.Money(10*1000 + chunks*2000); !estimated || cost != want || chunks == 0 {
		t.Errorf("stream without usage: cost %s estimated %v, %d chunks; want %s, estimated", cost, estimated, chunks, want)
	}

	c = b.chat(t)
	c.Body, c.Stream = rawBody(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,`+
		`"stream_options":{"include_usage":true},"metadata":{"mock_usage":"prompt=7,completion=3"}}`), true
	if err := b.svc.Serve(t.Context(), c, &recordedAnswer{}); err != nil {
		t.Fatal(err)
	}
	if cost, estimated = c.Cost(); estimated || cost != weir.Money(7*1000+3*2000) {
		t.Errorf("stream with usage: cost %s estimated %v; want 0.000013 measured", cost, estimated)
	}
}

// TestCostOfImagesAndSpeech: images are priced by the count of what was
// made at the size asked for, speech by its input's characters.
func TestCostOfImagesAndSpeech(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind  weir.ModelKind
		path  string
		body  string
		wants weir.Wants
		want  string
	}{
		{weir.KindImages, "/images/generations", `{"model":"m","prompt":"a cat","n":3,"size":"1024x1024"}`,
			weir.Wants{Size: "1024x1024", N: 3}, "0.12"},
		{weir.KindImages, "/images/generations", `{"model":"m","prompt":"a cat","size":"512x512"}`,
			weir.Wants{Size: "512x512"}, "0.08"},
		{weir.KindSpeech, "/audio/speech", `{"model":"m","input":"hello there","voice":"alloy"}`,
			weir.Wants{Voice: "alloy", Characters: 11}, "0.000165"},
	} {
		b := setup(t, setupOpts{catalog: func(c *weir.Catalog) { priced(t)(c); c.Models[0].Kind = tc.kind }})
		c := b.chat(t)
		c.Path, c.Body, c.Wants = tc.path, rawBody(tc.body), tc.wants
		if err := b.svc.Serve(t.Context(), c, &recordedAnswer{}); err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if cost, estimated := c.Cost(); cost.String() != tc.want || estimated {
			t.Errorf("%s: cost %s estimated %v; want %s measured", tc.body, cost, estimated, tc.want)
		}
		if est := c.Estimate("up/m"); est.String() != tc.want {
			t.Errorf("%s: estimate %s; want %s, what it cost", tc.body, est, tc.want)
		}
	}
}

// TestEstimateOfCall: a call's estimate is its platform model's (with
// its max_output_tokens when the request sets no max_tokens), an edge
// node's at its model's node price, and nothing in simulation.
func TestEstimateOfCall(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) {
		priced(t)(c)
		c.PlatformModels[0].Supports.MaxOutputTokens = 1000
		c.Models[0].NodePrice = weir.Price{Output: money(t, "1")}
	}})
	c := b.chat(t)
	c.Wants = weir.Wants{PromptTokens: 1000}
	for _, tc := range []struct {
		name, pm string
		mode     weir.RunMode
		want     string
	}{
		{"platform model", "up/m", "", "0.003"},
		{"node", "node:n1/p", "", "0.004096"},
		{"simulated", "up/m", weir.RunSimulation, "0.00"},
	} {
		c.RunMode = tc.mode
		if got := c.Estimate(tc.pm); got.String() != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestTaskCost: a video job costs its seconds at its platform model's
// price; one not admitted to a platform model is not priced.
func TestTaskCost(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) {
		onlyUp(c)
		c.PlatformModels[0].Price = weir.Price{Second: money(t, "0.10"), Request: money(t, "0.01")}
	}})
	for _, tc := range []struct {
		task weir.Task
		want string
		ok   bool
	}{
		{weir.Task{PlatformModel: "up/m", Input: []byte(`{"model":"v","prompt":"p","seconds":"8"}`)}, "0.81", true},
		{weir.Task{PlatformModel: "up/m", Input: []byte(`{"model":"v","prompt":"p"}`)}, "0.41", true},
		{weir.Task{Input: []byte(`{"model":"v","seconds":"8"}`)}, "0.00", false},
		{weir.Task{PlatformModel: "gone/m", Input: []byte(`{}`)}, "0.00", false},
	} {
		if got, ok := b.svc.TaskCost(tc.task); got.String() != tc.want || ok != tc.ok {
			t.Errorf("TaskCost(%s on %q) = %s, %v; want %s, %v", tc.task.Input, tc.task.PlatformModel, got, ok, tc.want, tc.ok)
		}
	}
}
