package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider"
)

// TestRepointedPlatformModelKeptForItsTasks: a reload that keeps a
// platform model's name but points it at another account is, for the
// tasks submitted on it, its removal: TargetAt answers for their site
// with the old platform's target, marked Retired, while the platform
// model's scope holds leases, and the new one for new work; Target is
// the new one. A change that keeps the site (a limit, the upstream
// model) changes neither. Once the scope holds no lease the old site is
// forgotten, at the next poll of the overrides or RetireLeft.
func TestRepointedPlatformModelKeptForItsTasks(t *testing.T) {
	eachRetireLater(t, func(t *testing.T, b *testBundle, later bool) {
		ctx := t.Context()
		old, ok := b.svc.Target("up2/m", "")
		if !ok || old.Site == "" {
			t.Fatalf("up2/m's target: %+v, %v; want one with its site", old, ok)
		}
		lease := b.fill(t, "up2/m", 1)
		// up is on a site of its own: up2's old site is up2's alone.
		moved := b.catalog()
		moved.Platforms[0].APIKey = "sk-up"
		moved.Platforms[1].APIKey = "sk-another-account"
		if err := b.svc.Apply(ctx, moved, ""); err != nil {
			t.Fatal(err)
		}
		now, ok := b.svc.Target("up2/m", "")
		if !ok || now.Retired || now.Site == old.Site {
			t.Fatalf("up2/m's target once repointed: %+v, %v; want the new site's, not retired", now, ok)
		}
		if tg, ok := b.svc.TargetAt("up2/m", "", old.Site); !ok || !tg.Retired || tg.Unscoped || tg.Site != old.Site {
			t.Errorf("up2/m's target on its old site once repointed: %+v, %v; want it, retired", tg, ok)
		}
		if tg, ok := b.svc.TargetAt("up2/m", "", now.Site); !ok || tg.Retired || tg.Site != now.Site {
			t.Errorf("up2/m's target on its new site: %+v, %v; want the catalog's", tg, ok)
		}
		// A change that keeps the site moves nothing.
		same := b.catalog()
		same.Platforms[0].APIKey = "sk-up"
		same.Platforms[1].APIKey = "sk-another-account"
		same.PlatformModels[1].Concurrency = 5
		same.PlatformModels[1].Upstream = "gpt-4o"
		if err := b.svc.Apply(ctx, same, ""); err != nil {
			t.Fatal(err)
		}
		if tg, ok := b.svc.TargetAt("up2/m", "", now.Site); !ok || tg.Retired || tg.Upstream != "gpt-4o" {
			t.Errorf("up2/m's target after a change on its site: %+v, %v; want the catalog's", tg, ok)
		}
		if n := len(b.svc.leaving.moved); n != 1 {
			t.Errorf("%d sites kept as moved from; want the old one only", n)
		}
		if tg, ok := b.svc.TargetAt("up2/m", "", old.Site); !ok || !tg.Retired {
			t.Errorf("up2/m's target on its old site, its lease held: %+v, %v; want it kept", tg, ok)
		}
		if err := b.engine.Release(ctx, lease.ID, lease.Owner); err != nil {
			t.Fatal(err)
		}
		if later {
			b.svc.RetireLeft(ctx)
		} else {
			b.clock.Advance(b.svc.cfg.OverridePoll)
		}
		if tg, ok := b.svc.TargetAt("up2/m", "", old.Site); ok {
			t.Errorf("up2/m's target on its old site once its scope holds no lease: %+v; want it forgotten", tg)
		}
	})
}

// TestRemovedPlatformModelFollowedOnItsSite: a process that never knew
// a platform model (it started after the catalog that removed it) finds
// a job submitted there on its site, if the catalog has a platform
// there, marked Retired and Unscoped (no lease can be held there); and
// nothing if it has none.
func TestRemovedPlatformModelFollowedOnItsSite(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := t.Context()
	old, ok := b.svc.Target("up2/m", "")
	if !ok {
		t.Fatal("no target for up2/m")
	}
	without := b.catalog()
	without.PlatformModels = without.PlatformModels[:1]
	without.Models[0].Candidates = without.Models[0].Candidates[:1]
	if err := b.svc.Apply(ctx, without, ""); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.svc.Target("up2/m", ""); ok {
		t.Fatal("up2/m removed with no lease still has a target")
	}
	tg, ok := b.svc.TargetAt("up2/m", "", old.Site)
	if !ok || !tg.Retired || !tg.Unscoped || tg.Site != old.Site || tg.Adapter == nil {
		t.Errorf("up2/m's job on its site, its platform still there: %+v, %v; want a retired, unscoped target", tg, ok)
	}
	gone := b.catalog()
	onlyUp(&gone)
	gone.Platforms[0].APIKey = "sk-another-account"
	if err := b.svc.Apply(ctx, gone, ""); err != nil {
		t.Fatal(err)
	}
	if tg, ok := b.svc.TargetAt("up2/m", "", old.Site); ok {
		t.Errorf("up2/m's job on a site the catalog has no platform on: %+v; want none", tg)
	}
	if _, ok := b.svc.TargetAt("up/m", "", old.Site); ok {
		t.Error("up/m, repointed with no lease held, still found on its old site")
	}
}

// TestSiteOf: a platform's site changes with its kind, base URL, region
// and account, not with its timeouts or the secrets paired with an
// identity; it shows no credential, nor a base URL's userinfo or query.
func TestSiteOf(t *testing.T) {
	t.Parallel()
	base := provider.Platform{Kind: "openai", BaseURL: "https://user:pw@api.example.com/v1?token=tk", APIKey: "sk-secret-1",
		AccessKeyID: "AKIA1", SecretAccessKey: "s3cret", ClientSecret: "cs", Timeout: time.Second}
	site := siteOf(base)
	for _, leak := range []string{"sk-secret-1", "user", "pw", "tk", "AKIA1", "s3cret"} {
		if strings.Contains(site, leak) {
			t.Errorf("site %q shows %q", site, leak)
		}
	}
	same := base
	same.Timeout, same.CallTimeout, same.SecretAccessKey, same.ClientSecret, same.SessionToken = time.Minute, time.Hour, "rotated", "rotated", "st"
	if got := siteOf(same); got != site {
		t.Errorf("site with other timeouts and rotated secrets: %q; want %q", got, site)
	}
	for name, edit := range map[string]func(*provider.Platform){
		"kind":          func(p *provider.Platform) { p.Kind = "azure" },
		"base URL":      func(p *provider.Platform) { p.BaseURL = "https://api.example.org/v1" },
		"region":        func(p *provider.Platform) { p.Region = "eu-west-1" },
		"API key":       func(p *provider.Platform) { p.APIKey = "sk-secret-2" },
		"access key id": func(p *provider.Platform) { p.AccessKeyID = "AKIA2" },
		"tenant":        func(p *provider.Platform) { p.TenantID = "t2" },
		"client":        func(p *provider.Platform) { p.ClientID = "c2" },
	} {
		other := base
		edit(&other)
		if siteOf(other) == site {
			t.Errorf("another %s: the same site %q", name, site)
		}
	}
}
