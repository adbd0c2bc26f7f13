package edge

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/apierror"
)

// ForgetPath is where a replica forgets, for another, a gone node whose
// session it held (Relay.Forget).
const ForgetPath = "/internal/edge/forget"

// Holders is what a Directory may also know: the base URLs of the other
// replicas whose published nodes list the node (by id or name), gone or
// not. fleet.Board implements it.
type Holders interface {
	Holding(node string) []string
}

// forgetRequest is the body of a forget sent to another replica.
type forgetRequest struct {
	Node string `json:"node"`
}

// Forget forgets a gone node of the fleet, by id or name: on this
// replica's Hub and on every other replica whose published nodes list
// it (the Directory's Holders), each of which retires the scopes its
// own session of the node configured. ErrNodeConnected if a replica
// holds it live (nothing is forgotten then, where that was found
// first), ErrUnknownNode if none knows it.
func (r *Relay) Forget(ctx context.Context, node string) (weir.ForgottenNode, error) {
	out := weir.ForgottenNode{Scopes: []string{}}
	found := false
	merge := func(f weir.ForgottenNode) {
		found = true
		out.ID, out.Name = f.ID, f.Name
		out.Scopes = append(out.Scopes, f.Scopes...)
	}
	if r.hub != nil && r.hub.live(node) {
		return weir.ForgottenNode{}, fmt.Errorf("%w: node %q has a live session on this replica; revoke its token (weir nodes revoke) to end it, then forget it",
			ErrNodeConnected, node)
	}
	var bases []string
	if h, ok := r.dir.(Holders); ok && r.cfg.Secret != "" {
		bases = h.Holding(node)
	}
	// A live session elsewhere refuses the forget before this replica
	// forgets anything: ask the others first.
	// take keeps one replica's answer: what it forgot, or why not; a
	// node live there ends the forget.
	var failed error
	take := func(f weir.ForgottenNode, err error) error {
		switch {
		case err == nil:
			merge(f)
		case errors.Is(err, ErrUnknownNode):
		case errors.Is(err, ErrNodeConnected):
			return err
		default:
			failed = errors.Join(failed, err)
		}
		return nil
	}
	for _, base := range bases {
		if err := take(r.forgetAt(ctx, base, node)); err != nil {
			return weir.ForgottenNode{}, err
		}
	}
	if r.hub != nil {
		if err := take(r.hub.Forget(ctx, node)); err != nil {
			return weir.ForgottenNode{}, err
		}
	}
	switch {
	case failed != nil:
		return weir.ForgottenNode{}, failed
	case !found:
		return weir.ForgottenNode{}, fmt.Errorf("%w: %q, on any replica", ErrUnknownNode, node)
	}
	return out, nil
}

// forgetAt asks the replica at base to forget node.
func (r *Relay) forgetAt(ctx context.Context, base, node string) (weir.ForgottenNode, error) {
	body, _ := json.Marshal(forgetRequest{Node: node})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+ForgetPath, bytes.NewReader(body))
	if err != nil {
		return weir.ForgottenNode{}, err
	}
	req.Header.Set("Authorization", "Bearer "+r.cfg.Secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.cfg.Client.Do(req)
	if err != nil {
		return weir.ForgottenNode{}, fmt.Errorf("ask %s to forget node %q: %w", base, node, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return weir.ForgottenNode{}, fmt.Errorf("ask %s to forget node %q: %w", base, node, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		var f weir.ForgottenNode
		if err := json.Unmarshal(answer, &f); err != nil {
			return weir.ForgottenNode{}, fmt.Errorf("%s's answer to a forget: %w", base, err)
		}
		return f, nil
	case http.StatusNotFound:
		return weir.ForgottenNode{}, fmt.Errorf("%w: %q at %s", ErrUnknownNode, node, base)
	case http.StatusConflict:
		return weir.ForgottenNode{}, fmt.Errorf("%w: node %q has a live session at %s; revoke its token (weir nodes revoke) to end it, then forget it",
			ErrNodeConnected, node, base)
	}
	return weir.ForgottenNode{}, fmt.Errorf("%s could not forget node %q: %s: %s", base, node, resp.Status, bytes.TrimSpace(answer))
}

// ForgetHandler forgets, for another replica of the fleet, a gone node
// whose session this replica's Hub held (ForgetPath), authenticated by
// the fleet's secret: 200 with what it retired, 404 if the Hub does not
// know the node, 409 if it holds it live.
func (r *Relay) ForgetHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		token, _ := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
		if r.hub == nil || r.cfg.Secret == "" || subtle.ConstantTimeCompare([]byte(token), []byte(r.cfg.Secret)) != 1 {
			r.refuse(w, req, http.StatusUnauthorized, "relay_unauthorized", "a forget needs the fleet's secret")
			return
		}
		var fr forgetRequest
		if err := json.NewDecoder(io.LimitReader(req.Body, 4<<10)).Decode(&fr); err != nil || fr.Node == "" || len(fr.Node) > 256 {
			r.refuse(w, req, http.StatusBadRequest, "invalid_forget", `a forget's body is {"node": "<id or name>"}`)
			return
		}
		f, err := r.hub.Forget(req.Context(), fr.Node)
		switch {
		case errors.Is(err, ErrUnknownNode):
			apierror.Write(w, &apierror.Answer{Code: weir.CodeNotFound, Status: http.StatusNotFound, Message: err.Error()})
		case errors.Is(err, ErrNodeConnected):
			apierror.Write(w, &apierror.Answer{Code: "node_connected", Status: http.StatusConflict, Message: err.Error()})
		case err != nil:
			r.deps.Logger.Error("edge: could not forget a node for another replica", "node", fr.Node, "error", err)
			apierror.Write(w, &apierror.Answer{Code: weir.CodeInternal, Status: http.StatusInternalServerError, Message: err.Error()})
		default:
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(f)
		}
	})
}
