package httpapi

import (
	"net/http"
	"testing"

	"github.com/weir-gateway/weir"
)

// TestUsageRecordCarriesCost: a request's usage record names its key's
// group and carries its cost, priced from the usage the upstream
// reported, through the Chat Completions endpoint and a dialect in front
// (the Messages API) alike.
func TestUsageRecordCarriesCost(t *testing.T) {
	t.Parallel()
	records := make(chan weir.Usage, 8)
	b := setup(t, setupOpts{
		deps: func(d *Deps) { d.Usage = func(u weir.Usage) { records <- u } },
		catalog: &weir.Catalog{
			Platforms: []weir.Platform{{Name: "up", Kind: "openai", BaseURL: "UP"}},
			PlatformModels: []weir.PlatformModel{{Name: "up/m", Platform: "up", Upstream: "gpt-4o-mini",
				Price: weir.Price{Input: 150_000_000, CachedInput: 75_000_000, Output: 600_000_000}}},
			Models: []weir.Model{{Name: "m", Kind: weir.KindChat, Candidates: []weir.Candidate{{PlatformModel: "up/m", Weight: 1}}}},
			Groups: []weir.Group{{Name: "team"}},
		},
	})
	b.key = b.newKey(t, weir.APIKey{Group: "team"})
	for _, tc := range []struct {
		path, body string
		want       weir.Money
	}{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],` +
			`"metadata":{"mock_usage":"prompt=2000,cached=1000,completion=500"}}`, 1000*150 + 1000*75 + 500*600},
		{"/v1/messages", `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"hi"}],` +
			`"metadata":{"user_id":"u1"}}`, 0},
	} {
		resp := b.post(t, tc.path, tc.body, http.Header{"Anthropic-Version": {"2023-06-01"}})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d", tc.path, resp.StatusCode)
		}
		u := <-records
		want := tc.want
		if want == 0 {
			// The mock counts the translated request's tokens itself.
			want = weir.Money(u.PromptTokens*150 + u.CompletionTokens*600)
		}
		if u.Group != "team" || u.Cost != want || u.CostEstimated || u.Cost == 0 {
			t.Errorf("%s: record %+v; want group team, cost %s measured", tc.path, u, want)
		}
	}
}
