package mock

import (
	"fmt"
	"strconv"
	"strings"
)

// usageReport is the usage a chat completion reports in place of its own
// count, as X-Mock-Usage (or the request's metadata.mock_usage) says:
// "none" reports none at all; "prompt=N,completion=N,cached=N", any of
// them, reports those counts (the rest as counted). It changes what is
// reported, never what is answered, so that a test can make a request's
// real cost differ from what the gateway estimated.
type usageReport struct {
	none                       bool
	prompt, completion, cached int // -1: as counted
}

// noUsageReport reports the usage as counted.
var noUsageReport = usageReport{prompt: -1, completion: -1, cached: -1}

func parseUsageReport(v string) (usageReport, error) {
	u := noUsageReport
	if v == "" {
		return u, nil
	}
	if v == "none" {
		u.none = true
		return u, nil
	}
	for _, part := range strings.Split(v, ",") {
		name, num, _ := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 || n > maxTokens {
			return u, fmt.Errorf("X-Mock-Usage must be none or prompt=N,completion=N,cached=N (each from 0 to %d), not %q", maxTokens, v)
		}
		switch name {
		case "prompt":
			u.prompt = n
		case "completion":
			u.completion = n
		case "cached":
			u.cached = n
		default:
			return u, fmt.Errorf("X-Mock-Usage names prompt, completion and cached, not %q", name)
		}
	}
	return u, nil
}

// counts are the prompt, completion and cached tokens to report of an
// answer that counted prompt and completion (and read nothing from a
// cache).
func (u usageReport) counts(prompt, completion int) (int, int, int) {
	pick := func(set, counted int) int {
		if set >= 0 {
			return set
		}
		return counted
	}
	return pick(u.prompt, prompt), pick(u.completion, completion), pick(u.cached, 0)
}
