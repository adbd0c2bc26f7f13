package gateway

import (
	"slices"
	"testing"

	"github.com/weir-gateway/weir"
)

// TestOrder: a request's platform models are the router's order less
// those that refuse what it wants and those off its pinned platform; a
// request none can serve has a refusal naming why: what it wants, if
// that left one out, else the pin.
func TestOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) {
		c.PlatformModels[0].Supports.Seconds = []int{4}
		c.Platforms = append(c.Platforms, weir.Platform{Name: "up3", Kind: "openai", BaseURL: c.Platforms[0].BaseURL})
	}})
	st := b.svc.Snapshot()
	m, _ := st.Model("m")
	for _, tc := range []struct {
		name     string
		w        weir.Wants
		platform string
		want     []string
		param    string // of the refusal; "" none
	}{
		{"all", weir.Wants{}, "", []string{"up/m", "up2/m"}, ""},
		{"one refuses", weir.Wants{Seconds: 8}, "", []string{"up2/m"}, "seconds"},
		{"pinned", weir.Wants{}, "up2", []string{"up2/m"}, ""},
		{"pinned to the one that refuses", weir.Wants{Seconds: 8}, "up", nil, "seconds"},
		{"pinned where none is", weir.Wants{}, "up3", nil, ParamPlatform},
	} {
		pms, refusal := b.svc.order(st, m, tc.w, nil, tc.platform)
		param := ""
		if refusal != nil {
			param = refusal.Param
		}
		if !slices.Equal(pms, tc.want) || param != tc.param {
			t.Errorf("%s: %v, refusal naming %q; want %v, %q", tc.name, pms, param, tc.want, tc.param)
		}
	}
}
