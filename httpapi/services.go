package httpapi

import (
	"context"
	"net/http"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/provider"
)

// The services the API calls, each declared here by the role it plays,
// so that a test can stand a fake in for one.

// Gateway is one model request's way: who calls, what its key may ask,
// and the call itself; and the models a key may list.
type Gateway interface {
	// Authenticate finds the key whose secret a request bears.
	Authenticate(ctx context.Context, secret string) (weir.APIKey, error)
	// Prepare decides whether key may make the request ask describes,
	// and how it runs.
	Prepare(ctx context.Context, key weir.APIKey, ask gateway.Ask) (gateway.Grant, error)
	// Serve takes a prepared call to an upstream and writes its answer
	// to out; see gateway.Service.Serve for what it returns.
	Serve(ctx context.Context, c *gateway.Call, out gateway.Answer) error
	// Models are the names of the models k may use, sorted.
	Models(k weir.APIKey) []string
	// Ready is nil once there is a catalog to serve by.
	Ready() error
}

// Responses is what passing the Responses API through needs beyond
// Serve (gateway.Service).
type Responses interface {
	// BindResponse records that platform holds the response id, which
	// keyID's request made.
	BindResponse(ctx context.Context, id, platform, keyID string) error
	// ResponsePlatform is the platform holding the response id that
	// keyID's request made; gateway.ErrResponseNotFound if none is
	// bound, gateway.ErrResponseOfAnotherKey (which matches it) if it is
	// another key's.
	ResponsePlatform(ctx context.Context, keyID, id string) (string, error)
	// ResponseCall passes c, a call on that response, to its platform.
	ResponseCall(ctx context.Context, keyID, id string, c provider.Call) (*http.Response, error)
}

var _ Responses = (*gateway.Service)(nil)

// TokenCounter asks an anthropic platform to count a Messages request's
// input tokens (gateway.Service); a Gateway that is not one leaves
// count_tokens to Weir's estimate.
type TokenCounter interface {
	// CountTokens passes body to the platform of the first candidate
	// of g's model if it speaks the Messages API; ok false if it does
	// not.
	CountTokens(ctx context.Context, g gateway.Grant, body gateway.Body, header http.Header) (*http.Response, bool, error)
}

var _ TokenCounter = (*gateway.Service)(nil)

// Queues is what the admin API shows of the engine's scopes.
type Queues interface {
	Scopes(ctx context.Context) []gateway.ScopeView
}

// Tasks is the task front the video and task APIs call: tasks submitted,
// found, listed, cancelled and deleted, and a video's content fetched,
// with the gateway's errors.
type Tasks interface {
	Submit(ctx context.Context, key weir.APIKey, req gateway.TaskRequest) (t weir.Task, created bool, err error)
	// Own is key's task; gateway.ErrTaskNotFound if it is not there, not
	// key's or deleted.
	Own(ctx context.Context, key weir.APIKey, id string) (weir.Task, error)
	// Get is any task, deleted ones too.
	Get(ctx context.Context, id string) (weir.Task, error)
	List(ctx context.Context, f weir.TaskFilter) ([]weir.Task, error)
	Cancel(ctx context.Context, id string) (weir.Task, error)
	// Withdraw cancels task t, just created, whose submission's client
	// left before it was answered, unless a retry may find it
	// (gateway.Tasks.Withdraw); it reports whether it did.
	Withdraw(ctx context.Context, t weir.Task) (bool, error)
	Delete(ctx context.Context, t weir.Task) error
	Position(ctx context.Context, id string) (admission.Position, bool)
	Content(ctx context.Context, t weir.Task, variant string) (*http.Response, error)
}

// Budgets keeps the budgets the admin API lists, creates, changes and
// deletes: the store's (weir.BudgetStore), which every replica reads.
type Budgets interface {
	BudgetCreate(ctx context.Context, b weir.Budget) error
	BudgetGet(ctx context.Context, id string) (weir.Budget, error)
	BudgetList(ctx context.Context, f weir.BudgetFilter) ([]weir.Budget, error)
	BudgetUpdate(ctx context.Context, p *weir.BudgetUpdateParams) (weir.Budget, error)
	BudgetDelete(ctx context.Context, id string) error
}

var (
	_ Gateway = (*gateway.Service)(nil)
	_ Queues  = (*gateway.Service)(nil)
	_ Tasks   = (*gateway.Tasks)(nil)
)
