package config

import (
	"net/url"
	"strings"
)

// Spend is where budget alerts go (docs/budgets.md, "Alerts").
type Spend struct {
	// AlertsURL receives a signed event (Standard Webhooks) each time a
	// budget crosses one of its alert thresholds, once per budget,
	// window and threshold across a fleet. It is the operator's own
	// receiver: it may be on a private network or loopback. Default "":
	// alerts are counted (weir_budget_alerts_total) and logged, not sent.
	AlertsURL string `yaml:"alerts_url"`
	// AlertsSecret signs them ("whsec_..."); required with AlertsURL.
	// Write it as ${ENV_VAR} to keep it out of the file.
	AlertsSecret string `yaml:"alerts_secret"`
}

func (s Spend) validate() error {
	switch {
	case s.AlertsURL == "" && s.AlertsSecret != "":
		return invalidf("spend.alerts_secret", "signs what goes to spend.alerts_url, which is not set")
	case s.AlertsURL == "":
		return nil
	case s.AlertsSecret == "":
		return invalidf("spend.alerts_secret", "required with spend.alerts_url: receivers check the signature")
	case !strings.HasPrefix(s.AlertsSecret, "whsec_"):
		return invalidf("spend.alerts_secret", "want a Standard Webhooks secret, whsec_ and base64")
	}
	u, err := url.Parse(s.AlertsURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return invalidf("spend.alerts_url", "want an absolute http or https URL")
	}
	return nil
}
