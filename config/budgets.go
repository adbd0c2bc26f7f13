package config

import (
	"fmt"
	"time"

	"github.com/weir-gateway/weir"
)

// Budget is one entry of the budgets list: an amount a subject may spend
// per window (docs/budgets.md).
type Budget struct {
	// Subject is whose spend it counts: group:NAME, model:NAME,
	// platform_model:NAME or key:ID. Required.
	Subject string `yaml:"subject"`
	// Budget is the amount and its window, AMOUNT/WINDOW: "500/month",
	// "12.50/day", "100/30d". A window is a calendar day, week (from
	// Monday) or month, or a rolling duration. Required.
	Budget string `yaml:"budget"`
	// Zone is a calendar window's IANA time zone. Default "" (UTC).
	Zone string `yaml:"zone"`
	// Anchor is where a rolling window's periods start, RFC 3339.
	// Default "" (the Unix epoch).
	Anchor string `yaml:"anchor"`
	// Mode is hard (refuse what does not fit), soft (alert only) or
	// shadow (judge, count, refuse nothing). Default hard.
	Mode weir.BudgetMode `yaml:"mode"`
	// Alerts are thresholds in percent of the amount, ascending, each
	// alerting once per window. Default none.
	Alerts []int `yaml:"alerts"`
}

// validateBudgets checks what the catalog cannot see of the budgets: the
// text of their subject, amount and window, and anchor; the catalog
// checks the rest where it finds them.
func (c *Config) validateBudgets() error {
	for i, b := range c.Budgets {
		path := fmt.Sprintf("budgets[%d]", i)
		if _, err := weir.ParseBudgetSubject(b.Subject); err != nil {
			return invalidf(path+".subject", "%q: want group:NAME, model:NAME, platform_model:NAME, key:ID, user:END_USER or user:*", b.Subject)
		}
		if _, _, err := weir.ParseBudgetSpec(b.Budget); err != nil {
			return invalidf(path+".budget", "%q: want AMOUNT/WINDOW, such as 500/month, 12.50/day or 100/30d", b.Budget)
		}
		if b.Anchor != "" {
			if _, err := time.Parse(time.RFC3339, b.Anchor); err != nil {
				return invalidf(path+".anchor", "%q: want an RFC 3339 time, such as 2026-01-01T00:00:00Z", b.Anchor)
			}
		}
	}
	return nil
}

// budgets converts the budgets list, each with its ConfigBudgetID and
// defaults; what does not parse (validateBudgets refuses it) is left
// zero for the catalog to refuse.
func (c *Config) budgets() []weir.Budget {
	var out []weir.Budget
	for _, b := range c.Budgets {
		sub, _ := weir.ParseBudgetSubject(b.Subject)
		amount, win, _ := weir.ParseBudgetSpec(b.Budget)
		win.Zone = b.Zone
		win.Anchor, _ = time.Parse(time.RFC3339, b.Anchor)
		out = append(out, weir.Budget{
			ID: weir.ConfigBudgetID(sub, win), Subject: sub, Amount: amount, Window: win,
			Mode: b.Mode, Alerts: b.Alerts,
		}.WithDefaults())
	}
	return out
}
