package gateway

import (
	"cmp"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
)

// ShadowLogConfig configures a ShadowLog.
type ShadowLogConfig struct {
	// Logger receives the lines, at Info. Default: none.
	Logger *slog.Logger
	// Clock times the lines. Default clock.Real.
	Clock clock.Clock
	// Every is the least time between two lines' batches. Default 1m.
	Every time.Duration
	// MaxScopes bounds the scopes one batch names, busiest first; the
	// others are summed in one more line. Default 20.
	MaxScopes int
}

// ShadowLog logs what the limits in shadow (weir.Limits.Shadow) would
// have done. One line per request would flood the log exactly when a
// limit is too tight, so it sums: the engine's shadow events are counted
// by scope, and a batch of lines — one per scope, with what its limits
// would have done since the last batch — is written at most once every
// Every, the first one as soon as an event comes after a quiet spell.
//
// It is an admission.Observer. The engine calls it under its lock, so
// Observe only counts; the lines are written from a timer.
type ShadowLog struct {
	cfg ShadowLogConfig

	mu      sync.Mutex
	tallies map[string]*shadowTally // by scope, since the last batch
	first   time.Time               // of the batch's events
	armed   bool                    // a batch is scheduled
	last    time.Time               // when the last batch was written
}

var _ admission.Observer = (*ShadowLog)(nil)

// shadowTally counts one scope's shadow events by would-be outcome.
type shadowTally struct {
	total int64
	by    map[admission.Outcome]int64
}

// NewShadowLog returns a ShadowLog.
func NewShadowLog(cfg ShadowLogConfig) *ShadowLog {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	if cfg.Every <= 0 {
		cfg.Every = time.Minute
	}
	if cfg.MaxScopes <= 0 {
		cfg.MaxScopes = 20
	}
	return &ShadowLog{cfg: cfg, tallies: make(map[string]*shadowTally)}
}

// Observe counts a shadow event; it ignores the others.
func (l *ShadowLog) Observe(e admission.Event) {
	if e.Outcome != admission.OutcomeShadow {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.tallies[e.Scope]
	if t == nil {
		t = &shadowTally{by: make(map[admission.Outcome]int64)}
		l.tallies[e.Scope] = t
	}
	t.total++
	t.by[e.Would]++
	if l.armed {
		return
	}
	l.armed = true
	now := l.cfg.Clock.Now()
	l.first = now
	wait := time.Duration(0)
	if !l.last.IsZero() {
		wait = max(0, l.last.Add(l.cfg.Every).Sub(now))
	}
	l.cfg.Clock.AfterFunc(wait, l.flush)
}

// flush writes the batch counted since the last.
func (l *ShadowLog) flush() {
	l.mu.Lock()
	tallies := l.tallies
	l.tallies = make(map[string]*shadowTally)
	l.armed = false
	now := l.cfg.Clock.Now()
	period := now.Sub(l.first).Round(time.Second).String()
	l.last = now
	l.mu.Unlock()

	scopes := make([]string, 0, len(tallies))
	for s := range tallies {
		scopes = append(scopes, s)
	}
	slices.SortFunc(scopes, func(a, b string) int {
		return cmp.Or(cmp.Compare(tallies[b].total, tallies[a].total), strings.Compare(a, b))
	})
	for i, s := range scopes {
		if i == l.cfg.MaxScopes {
			var rest int64
			for _, s := range scopes[i:] {
				rest += tallies[s].total
			}
			l.cfg.Logger.Info("more limits in shadow would have held requests back", "scopes", len(scopes)-i, "requests", rest, "over", period)
			return
		}
		t := tallies[s]
		attrs := []any{"scope", s, "limits", weir.ScopeLabel(s), "requests", t.total, "over", period}
		for _, o := range []admission.Outcome{admission.OutcomeQueued, admission.OutcomeRateLimited, admission.OutcomeQueueFull,
			admission.OutcomeNoCandidate, admission.OutcomeBudgetExceeded, admission.OutcomeTimeout} {
			if n := t.by[o]; n > 0 {
				attrs = append(attrs, "would_"+o.String(), n)
			}
		}
		l.cfg.Logger.Info("limits in shadow would have held requests back", attrs...)
	}
}
