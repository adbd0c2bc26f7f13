package gateway

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/keys"
)

// The parameters Prepare's refusals name: the request headers a client
// asks by (httpapi's Header constants of the same names are these).
const (
	// ParamPriority lowers (never raises) the priority of a request.
	ParamPriority = "X-Weir-Priority"
	// ParamMaxWait shortens (never lengthens) how long it may queue: a
	// Go duration ("2s") or seconds ("2", "0.5").
	ParamMaxWait = "X-Weir-Max-Wait"
	// ParamRunMode asks for a run mode other than production's
	// ("simulation", "acceptance"), if the key's group allows it.
	ParamRunMode = "X-Weir-Run-Mode"
	// ParamRunID names the acceptance run a request of that mode belongs
	// to.
	ParamRunID = "X-Weir-Run-Id"
	// ParamPlatform pins a request to one platform's candidates, if the
	// key's group allows it.
	ParamPlatform = "X-Weir-Platform"
)

// Ask is what a request asks for beyond its body: its model, what the
// endpoint it came to serves, and what its headers ask, as given (""
// where it asks nothing).
type Ask struct {
	Model string
	// Kind is the kind of model the endpoint serves; "" for a task
	// submission, which a model of any asynchronous kind takes.
	Kind weir.ModelKind
	// Priority, MaxWait, RunMode, RunID and Platform are what ParamPriority
	// and the others say.
	Priority, MaxWait, RunMode, RunID, Platform string
	// DefaultMaxWait is how long a request may queue unless its scopes or
	// MaxWait say less; negative: no cap. A task submission has none:
	// only its own MaxWait gives it a deadline.
	DefaultMaxWait time.Duration
}

// Grant is what Prepare decided of a request: the catalog and model it
// is served by, the tenant it counts against, its priority and deadline,
// and how it runs.
type Grant struct {
	// Snapshot is the catalog the request was resolved in, and Model its
	// model there.
	Snapshot *Snapshot
	Model    weir.Model
	// KeyID and Group (the key's, or the default) are the scopes it
	// counts against besides its platform model's.
	KeyID, Group string
	Priority     int32
	// Deadline ends its wait in the queue; zero: none. MaxWait is what
	// set it, and MaxWaitAskedBy names what asked for less than the
	// gateway's default ("" if nothing did), for the answer to a wait
	// that ran out.
	Deadline       time.Time
	MaxWait        time.Duration
	MaxWaitAskedBy string
	// RunMode is how it runs: "" production, weir.RunSimulation (the
	// simulator answers its upstream call), or weir.RunAcceptance in the
	// scopes of the run RunID (acceptance.go).
	RunMode weir.RunMode
	RunID   string
	// Platform, if set, pins the request to that platform's candidates
	// (ParamPlatform).
	Platform string
}

// Authenticate finds the key whose secret a request bears. A missing,
// unknown or revoked key is refused alike (ErrUnauthorized), so a caller
// learns nothing of which keys exist; a store that cannot answer is
// ErrUnavailable (retry shortly), and another failure of the lookup
// ErrInternal, each wrapping its cause.
func (s *Service) Authenticate(ctx context.Context, secret string) (weir.APIKey, error) {
	denied := func() error { return errorf(ErrUnauthorized, "", "invalid or missing API key") }
	if secret == "" {
		return weir.APIKey{}, denied()
	}
	k, found, err := s.keyBySecret(ctx, keys.Sum(secret))
	switch {
	case errors.Is(err, ErrUnavailable):
		return weir.APIKey{}, &Error{Category: ErrUnavailable, Message: "the key store cannot be reached; retry shortly", RetryAfter: time.Second, Err: err}
	case err != nil:
		return weir.APIKey{}, &Error{Category: ErrInternal, Message: "key lookup failed", Err: err}
	case !found || !k.Active():
		return weir.APIKey{}, denied()
	}
	return k, nil
}

// Prepare decides whether key may make the request ask describes, and
// how it runs — the one place that decides it for requests and task
// submissions alike. In order: a catalog is applied; the model exists,
// the key may use it and it serves the endpoint's kind; the priority
// (the group's, lowered by the request); the run mode, which the group
// must allow, and its run id; the platform pin, which the group must
// allow and which must hold a candidate of the model (a task may not
// pin); the deadline; and the key's own scope, configured on first use.
// Nothing in the engine changes until all but the last have passed.
//
// Which of the model's candidates can serve the request's body (its
// wants) is the candidates' order to say (order.go: Serve, and the task
// front for a submission); entering an acceptance run is Serve's and the
// task front's (EnterRun).
func (s *Service) Prepare(ctx context.Context, key weir.APIKey, ask Ask) (g Grant, err error) {
	// key, ask and g are read and written through pointers, and by
	// helpers that take pointers, so that this frame holds no copies of
	// them: a request's goroutine passes through it on its way to the
	// queue, and a stack that grew on the way stays large while the
	// request waits.
	st := s.state.Load()
	if st == nil {
		return g, errorf(ErrNoCandidate, "", "the gateway has no catalog yet")
	}
	if err := s.grantModel(st, &key, &ask, &g); err != nil {
		return g, err
	}
	if g.RunID, err = runIDOf(ask.RunID, g.RunMode); err != nil {
		return g, err
	}
	if err := s.deadlineOf(&ask, &g); err != nil {
		return g, err
	}
	if err := s.ensureKeyScope(ctx, &key); err != nil {
		return g, keyScopeError(err)
	}
	return g, nil
}

// grantModel sets g's model, group, priority, run mode and pinned
// platform, as Prepare says, or returns why not. g's model, key and group
// are set from the first check on: as Prepare has always left them.
//
//go:noinline
func (s *Service) grantModel(st *Snapshot, key *weir.APIKey, ask *Ask, g *Grant) error {
	if err := modelFor(st, key, ask, &g.Model); err != nil {
		return err
	}
	groupName, group := st.groupOf(key)
	g.Snapshot, g.KeyID, g.Group = st, key.ID, groupName
	var err error
	if g.Priority, err = priorityOf(ask.Priority, group.Priority); err != nil {
		return err
	}
	if g.RunMode, err = runModeOf(ask.RunMode, &group); err != nil {
		return err
	}
	if ask.Platform != "" {
		if g.Platform, err = platformOf(ask, st, &g.Model, &group); err != nil {
			return err
		}
	}
	return nil
}

// keyScopeError is Prepare's answer when the key's scope could not be
// configured.
//
//go:noinline
func keyScopeError(err error) error {
	return &Error{Category: ErrInternal, Message: "could not configure the key's scope", Err: err}
}

// modelFor sets *into to the model ask names, if it exists, key may use
// it and it serves what ask's endpoint serves; else it returns why not,
// *into left as it was.
func modelFor(st *Snapshot, key *weir.APIKey, ask *Ask, into *weir.Model) error {
	model, ok := st.models[ask.Model]
	if !ok || !key.Allows(ask.Model) || (ask.Kind == "" && !Taskable(model.Kind)) || (ask.Kind != "" && model.Kind != ask.Kind) {
		return modelRefused(ok, key, ask, model.Kind)
	}
	*into = model
	return nil
}

// modelRefused is why modelFor refuses ask's model, of kind kind (found:
// it exists). It is a function of its own so that modelFor's frame, on
// every request's way to the queue, holds none of its formatting.
//
//go:noinline
func modelRefused(found bool, key *weir.APIKey, ask *Ask, kind weir.ModelKind) error {
	switch {
	case !found:
		return errorf(ErrNotFound, "model", fmt.Sprintf("the model %q does not exist", ask.Model))
	case !key.Allows(ask.Model):
		return errorf(ErrForbidden, "model", fmt.Sprintf("this key may not use the model %q", ask.Model))
	case ask.Kind == "":
		return errorf(ErrInvalid, "model", fmt.Sprintf("the model %q serves %s, which runs no tasks (its requests carry files)", ask.Model, kind))
	}
	return errorf(ErrInvalid, "model", fmt.Sprintf("the model %q serves %s, not %s", ask.Model, kind, ask.Kind))
}

// priorityOf is base, lowered (never raised) by what v asks.
func priorityOf(v string, base int32) (int32, error) {
	if v == "" {
		return base, nil
	}
	p, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, errorf(ErrInvalid, ParamPriority, fmt.Sprintf("priority must be an integer from %d to %d", math.MinInt32, math.MaxInt32))
	}
	return min(base, int32(p)), nil
}

// runModeOf is the run mode v asks for, which group must allow.
func runModeOf(v string, group *weir.Group) (weir.RunMode, error) {
	mode := weir.RunMode(strings.ToLower(v))
	switch {
	case mode == "production":
		return "", nil
	case !mode.Valid():
		return "", errorf(ErrInvalid, ParamRunMode, fmt.Sprintf("unknown run mode %q: want production, %s or %s", v, weir.RunSimulation, weir.RunAcceptance))
	case !group.Allows(mode):
		return "", errorf(ErrForbidden, ParamRunMode, fmt.Sprintf("this key's group (%s) may not run requests in the %s mode", group.Name, mode))
	}
	return mode, nil
}

// runIDOf is the acceptance run id names: required in the acceptance
// mode, refused in the others.
func runIDOf(id string, mode weir.RunMode) (string, error) {
	switch {
	case mode != weir.RunAcceptance && id != "":
		return "", errorf(ErrInvalid, ParamRunID, "a run id is for the acceptance run mode ("+ParamRunMode+": acceptance)")
	case mode != weir.RunAcceptance:
		return "", nil
	case id == "":
		return "", errorf(ErrInvalid, ParamRunID, "the acceptance run mode needs a run id ("+ParamRunID+")")
	case !weir.ValidRunID(id):
		return "", errorf(ErrInvalid, ParamRunID, fmt.Sprintf("run id %q: want 1 to %d letters, digits, '.', '_' or '-'", id, weir.MaxRunID))
	}
	return id, nil
}

// platformOf is the platform ask pins itself to, which group must allow
// and which must hold a candidate of model; a task submission may not
// pin one.
func platformOf(ask *Ask, st *Snapshot, model *weir.Model, group *weir.Group) (string, error) {
	p := ask.Platform
	switch {
	case p == "":
		return "", nil
	case ask.Kind == "":
		return "", errorf(ErrInvalid, ParamPlatform, "pinning a platform is for synchronous requests; a task runs on its model's candidates")
	case !group.PinPlatform:
		return "", errorf(ErrForbidden, ParamPlatform, fmt.Sprintf("this key's group (%s) may not pin a platform", group.Name))
	case st.Adapter(p) == nil:
		return "", errorf(ErrInvalid, ParamPlatform, fmt.Sprintf("there is no platform %q", p))
	case !st.Serves(*model, p):
		// What the request asks for, not the gateway's state.
		return "", errorf(ErrUnservable, ParamPlatform, fmt.Sprintf("the model %q has no candidate on platform %q", model.Name, p))
	}
	return p, nil
}

// deadlineOf sets g's deadline: ask's DefaultMaxWait (an acceptance
// run's request waits in its own queue as long as it must,
// weir.AcceptanceMaxWait), or less if ask's MaxWait says so; a task's
// only if its MaxWait says so.
func (s *Service) deadlineOf(ask *Ask, g *Grant) error {
	maxWait := time.Duration(-1)
	if ask.Kind != "" {
		maxWait = ask.DefaultMaxWait
		if g.RunMode == weir.RunAcceptance {
			maxWait = weir.AcceptanceMaxWait
		}
	}
	if ask.MaxWait != "" {
		d, err := parseWait(ask.MaxWait)
		if err != nil {
			return errorf(ErrInvalid, ParamMaxWait, fmt.Sprintf("max wait must be a duration such as 2s or a number of seconds, from 0 to %g", maxWaitSeconds))
		}
		if maxWait < 0 || d < maxWait {
			maxWait, g.MaxWaitAskedBy = d, ParamMaxWait
		}
	}
	if maxWait >= 0 {
		g.MaxWait = maxWait
		g.Deadline = s.deps.Clock.Now().Add(maxWait)
	}
	return nil
}

// maxWaitSeconds is the most ParamMaxWait may say as a number.
const maxWaitSeconds = 1e6

// parseWait reads a wait: a Go duration or a number of seconds, neither
// negative, the number finite and at most a million seconds (NaN, which
// every comparison lets through, is refused by name).
func parseWait(v string) (time.Duration, error) {
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return d, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > maxWaitSeconds {
		return 0, fmt.Errorf("bad wait %q", v)
	}
	return time.Duration(f * float64(time.Second)), nil
}
