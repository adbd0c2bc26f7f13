package gateway

import (
	"errors"
	"strconv"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider"
)

// Outcome is how something the gateway did ended, as a low-cardinality
// word: the outcome of a request (its usage record's weir.Usage.Outcome,
// its log line) and of each upstream call (the outcome label of
// Metrics.ObserveUpstream). Every outcome is one of the constants below,
// an error code (a request answered with an error has its code as its
// outcome: outcomeOf), or an upstream's status (refusedOutcome,
// callOutcome).
type Outcome string

// Outcomes of a request and of an upstream call alike.
const (
	// OutcomeOK: the whole answer reached the client (a request); the
	// upstream answered 2xx (a call).
	OutcomeOK Outcome = "ok"
	// OutcomeUpstreamTooLarge: the upstream's answer was over
	// MaxResponseBytes, and refused.
	OutcomeUpstreamTooLarge Outcome = "upstream_too_large"
	// OutcomeUpstreamBroken: the upstream's answer was cut short once it
	// had started (a stream ended without its end).
	OutcomeUpstreamBroken Outcome = "upstream_broken"
)

// Outcomes of a request alone.
const (
	// OutcomeCancelled: the client went away before its answer ended.
	OutcomeCancelled Outcome = "cancelled"
	// OutcomeClientWriteTimeout: the client stopped reading its answer
	// for longer than a write may block.
	OutcomeClientWriteTimeout Outcome = "client_write_timeout"
)

// Outcomes of an upstream call alone; a call the upstream answered with
// an error status has the status as its outcome ("503").
const (
	OutcomeTimeout      Outcome = "timeout"
	OutcomeConnectError Outcome = "connect_error"
	// OutcomeCredential: the platform refused the gateway's credential.
	OutcomeCredential Outcome = "credential"
)

// codeOutcome is the outcome of a request answered with code's error.
func codeOutcome(code weir.Code) Outcome { return Outcome(code) }

// outcomeOf is the outcome of a request that ended in err before an
// answer started: its error code, or cancelled for a client gone.
func outcomeOf(err error) Outcome {
	if errors.Is(err, ErrClientGone) {
		return OutcomeCancelled
	}
	if code, _, ok := CodeOf(err); ok {
		return codeOutcome(code)
	}
	return codeOutcome(weir.CodeInternal)
}

// refusedOutcome is the outcome of a request whose upstream refused it
// with status, its answer passed on: upstream_<status>.
func refusedOutcome(status int) Outcome {
	return Outcome("upstream_" + strconv.Itoa(status))
}

// callOutcome is the outcome of an upstream call that failed with pe.
func callOutcome(pe *provider.Error) Outcome {
	switch {
	case pe.Credential:
		return OutcomeCredential
	case pe.Timeout:
		return OutcomeTimeout
	case pe.Status == 0:
		return OutcomeConnectError
	default:
		return Outcome(strconv.Itoa(pe.Status))
	}
}

// end records o as c's outcome.
func (c *Call) end(o Outcome) { c.Usage.Outcome = string(o) }
