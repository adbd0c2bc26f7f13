package gateway

import (
	"errors"
	"fmt"
	"testing"

	"github.com/weir-gateway/weir/provider"
)

// TestOutcomes: a request's outcome is its error's code (an unservable
// request's too: no_candidate), cancelled for a client gone, and
// internal_error for an error of no category; an upstream call's is what
// failed, or its status.
func TestOutcomes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		got  Outcome
		want string
	}{
		{outcomeOf(ErrClientGone), "cancelled"},
		{outcomeOf(fmt.Errorf("wrapped: %w", ErrClientGone)), "cancelled"},
		{outcomeOf(errorf(ErrUnservable, "n", "too many")), "no_candidate"},
		{outcomeOf(errorf(ErrQueueTimeout, "", "waited")), "queue_timeout"},
		{outcomeOf(errorf(ErrUnavailable, "", "no leader")), "store_unavailable"},
		{outcomeOf(errors.New("disk full")), "internal_error"},
		{refusedOutcome(400), "upstream_400"},
		{callOutcome(&provider.Error{Status: 503}), "503"},
		{callOutcome(&provider.Error{Timeout: true}), "timeout"},
		{callOutcome(&provider.Error{}), "connect_error"},
		{callOutcome(&provider.Error{Status: 401, Credential: true}), "credential"},
	} {
		if string(tc.got) != tc.want {
			t.Errorf("outcome %q, want %q", tc.got, tc.want)
		}
	}
}
