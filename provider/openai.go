package provider

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weir-gateway/weir/clock"
)

// OpenAI is the adapter for OpenAI-compatible APIs.
type OpenAI struct {
	BaseURL string // e.g. https://api.openai.com/v1
	APIKey  string
	Client  *http.Client
	// Timeout bounds the wait for response headers (0: none beyond ctx).
	Timeout time.Duration
	// IdleTimeout bounds each wait for more of the body once the headers
	// are in: the gap between a stream's chunks (0: none).
	IdleTimeout time.Duration
	// CallTimeout bounds the whole call, body included (0: none).
	CallTimeout time.Duration
	// AbortGrace is how long an abandoned call waits for the upstream to
	// hang up (see send). 0: DefaultAbortGrace; negative: no wait.
	AbortGrace time.Duration
	// Clock runs the bounds; nil: clock.Real.
	Clock clock.Clock

	// bearer is the Authorization header's value for APIKey, made once.
	bearer atomic.Pointer[[]string]
}

var _ Adapter = (*OpenAI)(nil)

// Do sends c and returns the response when the upstream answers 2xx.
func (o *OpenAI) Do(ctx context.Context, c Call) (*http.Response, error) {
	h := make(http.Header, 4)
	setPassedOn(h, &c)
	if o.APIKey != "" {
		h["Authorization"] = o.authorization()
	}
	opts := callOpts{
		client: o.Client,
		clock:  o.Clock,
		bounds: Bounds{Header: o.Timeout, Idle: o.IdleTimeout, Total: o.CallTimeout},
		grace:  o.AbortGrace,
	}
	resp, err := opts.do(ctx, o.BaseURL, c.Path, c, h)
	if err != nil {
		return nil, err
	}
	return checkStatus(resp, o.APIKey)
}

// authorization is the Authorization header's value for o.APIKey, a
// bearer token: made once and shared by every call, as setPassedOn's
// values are.
func (o *OpenAI) authorization() []string {
	if v := o.bearer.Load(); v != nil && strings.TrimPrefix((*v)[0], "Bearer ") == o.APIKey {
		return *v
	}
	v := []string{"Bearer " + o.APIKey}
	o.bearer.Store(&v)
	return v
}
