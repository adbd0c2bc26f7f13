package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/weir-gateway/weir"
)

// memOverrides is the overrides of a service given no store: kept in the
// process, with the stores' contract (storetest.ExerciseOverrides).
type memOverrides struct {
	mu sync.Mutex
	m  map[overrideKey]weir.Override
}

type overrideKey struct {
	scope string
	kind  weir.OverrideKind
}

var _ weir.OverrideStore = (*memOverrides)(nil)

func (m *memOverrides) OverrideSet(ctx context.Context, o weir.Override) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return fmt.Errorf("set %s of %s: %w", o.Kind, o.Scope, err)
	}
	o.Until, o.SetAt = stored(o.Until), stored(o.SetAt)
	m.mu.Lock()
	defer m.mu.Unlock()
	k := overrideKey{o.Scope, o.Kind}
	if was, ok := m.m[k]; ok && o.Kind == weir.OverridePause && !o.Until.After(was.Until) {
		return nil
	}
	if m.m == nil {
		m.m = make(map[overrideKey]weir.Override)
	}
	m.m[k] = o
	return nil
}

func (m *memOverrides) OverrideList(ctx context.Context) ([]weir.Override, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	out := make([]weir.Override, 0, len(m.m))
	for _, o := range m.m {
		out = append(out, o)
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b weir.Override) int {
		if c := strings.Compare(a.Scope, b.Scope); c != 0 {
			return c
		}
		return strings.Compare(string(a.Kind), string(b.Kind))
	})
	return out, nil
}

func (m *memOverrides) OverrideDelete(ctx context.Context, p *weir.OverrideDeleteParams) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := p.Validate(); err != nil {
		return 0, fmt.Errorf("delete overrides: %w", err)
	}
	endedBy := stored(p.EndedBy)
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k, o := range m.m {
		if k.kind != p.Kind || (p.Scope != "" && k.scope != p.Scope) ||
			(!endedBy.IsZero() && (o.Until.IsZero() || o.Until.After(endedBy))) {
			continue
		}
		delete(m.m, k)
		n++
	}
	return n, nil
}

// stored is t as the stores keep it: UTC, to the microsecond. A pause's
// end is taken so from the start, so that it ends at the same instant on
// every replica that reads it.
func stored(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}
