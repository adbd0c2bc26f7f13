package edge

import (
	"fmt"
	"net/url"
	"unicode"

	"github.com/weir-gateway/weir/edge/edgepb"
)

// Bounds on what one node may register: enough for any machine, small
// enough that a misbehaving node cannot make the gateway hold much.
const (
	maxProviders      = 64
	maxModels         = 256 // per provider
	maxSlots          = 4096
	maxNameBytes      = 128
	maxTargetBytes    = 2048
	maxVersionBytes   = 128
	maxProviderIDByte = 64
)

// validateRegister refuses a registration the gateway cannot serve from
// exactly: every field bounded, provider ids and model names unique.
func validateRegister(r *edgepb.Register) error {
	if len(r.Version) > maxVersionBytes {
		return fmt.Errorf("version is longer than %d bytes", maxVersionBytes)
	}
	if len(r.Providers) == 0 {
		return fmt.Errorf("a node registers at least one provider")
	}
	if len(r.Providers) > maxProviders {
		return fmt.Errorf("%d providers; at most %d", len(r.Providers), maxProviders)
	}
	seen := make(map[string]bool, len(r.Providers))
	for i, p := range r.Providers {
		if err := validProviderID(p.Id); err != nil {
			return fmt.Errorf("provider %d: %w", i, err)
		}
		if seen[p.Id] {
			return fmt.Errorf("provider %q is registered twice", p.Id)
		}
		seen[p.Id] = true
		if err := validateProvider(p); err != nil {
			return fmt.Errorf("provider %q: %w", p.Id, err)
		}
	}
	return nil
}

func validateProvider(p *edgepb.Provider) error {
	switch {
	case p.Adapter != "openai":
		return fmt.Errorf("adapter %q; the gateway knows \"openai\"", p.Adapter)
	case p.Target == "" || len(p.Target) > maxTargetBytes:
		return fmt.Errorf("target must be 1 to %d bytes", maxTargetBytes)
	case p.Slots < 1 || p.Slots > maxSlots:
		return fmt.Errorf("slots %d; from 1 to %d", p.Slots, maxSlots)
	case p.LongSlots < 0 || p.LongSlots > p.Slots:
		return fmt.Errorf("long_slots %d; from 0 to its slots (%d)", p.LongSlots, p.Slots)
	case p.LongSlots > 0 && p.LongPromptTokens <= 0:
		return fmt.Errorf("long_slots without long_prompt_tokens, the prompt size that needs one")
	case p.LongSlots == 0 && p.LongPromptTokens != 0:
		return fmt.Errorf("long_prompt_tokens without long_slots")
	case len(p.Models) == 0 || len(p.Models) > maxModels:
		return fmt.Errorf("%d models; from 1 to %d", len(p.Models), maxModels)
	}
	if u, err := url.Parse(p.Target); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("target %q is not an http(s) URL", p.Target)
	}
	names := make(map[string]bool, len(p.Models))
	for _, m := range p.Models {
		if err := validName(m.Name); err != nil {
			return fmt.Errorf("model name: %w", err)
		}
		if err := validName(m.Runtime); err != nil {
			return fmt.Errorf("model %q's runtime name: %w", m.Name, err)
		}
		if names[m.Name] {
			return fmt.Errorf("model %q is listed twice", m.Name)
		}
		names[m.Name] = true
	}
	return nil
}

// validProviderID: 1 to 64 of [A-Za-z0-9._-], so that it names a scope
// without ambiguity.
func validProviderID(id string) error {
	if id == "" || len(id) > maxProviderIDByte {
		return fmt.Errorf("id must be 1 to %d bytes", maxProviderIDByte)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("id %q: only letters, digits, '.', '_' and '-'", id)
		}
	}
	return nil
}

// validName: 1 to 128 bytes of printable characters.
func validName(s string) error {
	if s == "" || len(s) > maxNameBytes {
		return fmt.Errorf("%q must be 1 to %d bytes", s, maxNameBytes)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return fmt.Errorf("%q has a space or an unprintable character", s)
		}
	}
	return nil
}
