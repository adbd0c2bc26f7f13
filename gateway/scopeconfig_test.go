package gateway

import (
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// Every scope takes its limits from weir.Limits; only a platform model's
// holds a lease TTL, a platform model always shares turns between keys,
// and a group does if it says so.
func TestScopeConfigs(t *testing.T) {
	t.Parallel()
	l := weir.Limits{Concurrency: 1, RPM: 2, TPM: 3, QueueLimit: 4, MaxWait: 5 * time.Second,
		LeaseTTL: 6 * time.Second, FairnessWindow: 7 * time.Second, Shadow: true}
	common := admission.ScopeConfig{Limit: 1, RPM: 2, TPM: 3, QueueLimit: 4, MaxWait: 5 * time.Second,
		FairnessWindow: 7 * time.Second, Shadow: true}
	pm, group, key := common, common, common
	pm.LeaseTTL, pm.RoundRobin = 6*time.Second, true
	group.RoundRobin = true
	for _, tc := range []struct {
		name      string
		got, want admission.ScopeConfig
	}{
		{"platform model", platformModelScopeConfig(weir.PlatformModel{Limits: l}), pm},
		{"group", groupScopeConfig(weir.Group{Limits: l, RoundRobin: true}), group},
		{"key", keyScopeConfig(weir.APIKey{Limits: l}), key},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %+v; want %+v", tc.name, tc.got, tc.want)
		}
	}
}
