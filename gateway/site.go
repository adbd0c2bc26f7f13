package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider"
	"github.com/weir-gateway/weir/task"
)

// A task's upstream job lives on the platform it was submitted to: only
// that platform (its kind, its base URL, the account its credential
// opens) knows the job's id. Its site says which (siteOf), and the task
// records it at submit (weir.Task.UpstreamSite), so that its job is
// followed there to its end whatever its platform model became since.
//
// A reload that keeps a platform model's name but points it at another
// site (another platform, or its platform's kind, base URL, region or
// account changed) is, for the tasks submitted on it, its removal and the
// addition of a new one of the same name: they follow their jobs on the
// old site (TargetAt answers with a Retired target there, from the last
// catalog that had it: moved), a task admitted but not yet submitted is
// submitted on the new one, and new work is planned on the new one. A
// change that keeps the site (a limit, a price, a weight, a timeout, the
// upstream model's name) changes nothing for them. The platform model's
// scope is one, by its name: the old tasks' leases stay in it, counted
// against its new limit until they end.

// siteOf is the site of a platform configured as cfg: its kind and host
// (serverAddress), readable, and a digest of its kind, base URL, region
// and what names the account (an API key, an access key id, an Entra
// tenant and client), so that no secret, nor a base URL's userinfo or
// query, is shown or stored. The secrets a credential pairs with an
// identity (a secret access key, a client secret, a session token) are
// left out: rotated, they open the same account.
func siteOf(cfg provider.Platform) string {
	h := sha256.New()
	for _, f := range []string{cfg.Kind, cfg.BaseURL, cfg.Region, cfg.APIKey, cfg.AccessKeyID, cfg.TenantID, cfg.ClientID, cfg.TokenURL} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	kind := cfg.Kind
	if kind == "" {
		kind = "openai"
	}
	return strings.TrimSpace(kind+" "+serverAddress(cfg)) + " " + hex.EncodeToString(h.Sum(nil)[:8])
}

// siteOfPM is the site of platform model name in st; "" if st has not
// it.
func (st *Snapshot) siteOfPM(name string) string {
	pm, ok := st.pms[name]
	if !ok {
		return ""
	}
	return st.built[pm.Platform].site
}

// TargetAt implements task.SiteTargeter: a task submitted on site
// follows its job there. While platform model pmName is on site it is
// Target; once it points elsewhere, or has left the catalog, it is a
// Retired target on site from the catalog served, or from the last
// catalog that had it (movedFrom), if either has a platform on site.
func (s *Service) TargetAt(pmName string, mode weir.RunMode, site string) (task.Target, bool) {
	t, ok := s.Target(pmName, mode)
	if site == "" || mode == weir.RunSimulation || ok && t.Site == site {
		return t, ok
	}
	st := s.state.Load()
	if st == nil {
		return task.Target{}, false
	}
	_, inCatalog := st.pms[pmName]
	from, _ := s.leftCatalog(pmName)
	for _, snap := range s.sitesFrom(st, site) {
		if t, ok := snap.targetOnSite(pmName, site); ok {
			t.Retired = true
			t.Unscoped = !inCatalog && from == nil
			return t, true
		}
	}
	return task.Target{}, false
}

// sitesFrom are the catalogs that may have a platform on site, the one
// served (st) first.
func (s *Service) sitesFrom(st *Snapshot, site string) []*Snapshot {
	out := []*Snapshot{st}
	s.leaving.mu.RLock()
	defer s.leaving.mu.RUnlock()
	if m := s.leaving.moved[site]; m != nil {
		out = append(out, m.from)
	}
	for _, kept := range []map[string]*Snapshot{s.leaving.held, s.leaving.pms} {
		for _, snap := range kept {
			out = append(out, snap)
		}
	}
	return out
}

// targetOnSite is where a job of platform model pmName submitted on site
// is followed in st: the platform model's own target if st has it on
// site, else that of st's platform on site (an upstream job is followed
// by its platform alone: its upstream model name is not needed).
func (st *Snapshot) targetOnSite(pmName, site string) (task.Target, bool) {
	if st.siteOfPM(pmName) == site {
		return st.target(pmName)
	}
	names := slices.Sorted(maps.Keys(st.built))
	for _, name := range names {
		if st.built[name].site != site || st.async[name] == nil {
			continue
		}
		return task.Target{PlatformModel: pmName, Adapter: st.async[name], Site: site}, true
	}
	return task.Target{}, false
}

// movedSite is a site that platform models were pointed away from, for
// the tasks submitted there: from is the last catalog that had them on
// it, pms their names.
type movedSite struct {
	from *Snapshot
	pms  []string
}

// keepMovedLocked keeps, for each platform model next has on another
// site than before (in prev, or held or waiting for RetireLeft) whose
// scope holds leases (the tasks submitted there may be among them), the
// catalog that had it on its old site, for TargetAt. The caller holds
// applyMu.
func (s *Service) keepMovedLocked(ctx context.Context, prev, next *Snapshot) {
	for name := range next.pms {
		before := s.lastHad(prev, name)
		if before == nil {
			continue
		}
		old := before.siteOfPM(name)
		if old == "" || old == next.siteOfPM(name) || !s.scopeHeld(ctx, weir.PlatformModelScope(name)) {
			continue
		}
		s.keepMoved(old, name, before)
	}
}

// lastHad is the last catalog that had platform model name before the
// one being applied: prev, or one kept for it (leftCatalog); nil if none.
func (s *Service) lastHad(prev *Snapshot, name string) *Snapshot {
	if prev != nil {
		if _, ok := prev.pms[name]; ok {
			return prev
		}
	}
	from, _ := s.leftCatalog(name)
	return from
}

// keepMoved keeps from, the last catalog that had platform model name
// on site old, for TargetAt.
func (s *Service) keepMoved(old, name string, from *Snapshot) {
	l := &s.leaving
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.moved == nil {
		l.moved = make(map[string]*movedSite)
	}
	m := l.moved[old]
	if m == nil {
		m = &movedSite{}
		l.moved[old] = m
	}
	m.from = from
	if !slices.Contains(m.pms, name) {
		m.pms = append(m.pms, name)
	}
}
