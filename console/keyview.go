package console

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/keys"
)

// The keys view: listing with usage, creating (the secret shown once)
// and revoking.

// KeyRow is a key as the keys view lists it, with its usage over
// usageWindow as the store records it (every replica's), or, if the store
// cannot say, this process's since it started.
type KeyRow struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Prefix    string    `json:"prefix"`
	Group     string    `json:"group"`
	Models    []string  `json:"models,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
	Usage     KeyUsage  `json:"usage"`
}

// usageWindow is how far back the keys view sums usage.
const usageWindow = 24 * time.Hour

func (c *Console) listKeys(w http.ResponseWriter, r *http.Request) error {
	ks, err := c.deps.Keys.KeyList(r.Context())
	if err != nil {
		return fmt.Errorf("list keys: %w", err)
	}
	window := "the last 24 hours, every replica (as recorded: a few seconds behind)"
	recorded := make(map[string]KeyUsage)
	sums, err := c.deps.Keys.UsageByKey(r.Context(), c.deps.Clock.Now().Add(-usageWindow))
	if err != nil {
		c.deps.Logger.Warn("console: could not sum usage by key; showing this process's", "error", err)
		window, recorded = "this process, since it started (the store could not say)", nil
	}
	for _, u := range sums {
		recorded[u.KeyID] = KeyUsage{Requests: uint64(u.Requests), Failed: uint64(u.Failed), Tokens: uint64(u.Tokens), Last: u.Last}
	}
	out := make([]KeyRow, 0, len(ks))
	for _, k := range ks {
		u := recorded[k.ID]
		if recorded == nil {
			u = c.deps.Recorder.KeyUsage(k.ID)
		}
		out = append(out, KeyRow{ID: k.ID, Name: k.Name, Prefix: k.Prefix, Group: k.Group, Models: k.Models,
			CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt, Usage: u})
	}
	return writeJSON(w, map[string]any{"keys": out, "usage_window": window})
}

func (c *Console) createKey(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Name   string   `json:"name"`
		Group  string   `json:"group"`
		Models []string `json:"models"`
	}
	if err := decode(r, &in); err != nil {
		return err
	}
	if len(in.Name) > 200 {
		return &gateway.Error{Category: gateway.ErrInvalid, Param: "name", Message: "a name is at most 200 bytes"}
	}
	k := weir.APIKey{Name: in.Name, Group: in.Group, Models: in.Models}
	if k.Group == "" {
		k.Group = c.cfg.DefaultGroup
	}
	st := c.deps.Gateway.Snapshot()
	if st == nil {
		return &gateway.Error{Category: gateway.ErrUnavailable, Message: "no catalog is applied yet: its groups are not known"}
	}
	var fe *weir.FieldError
	if err := st.CheckKeyGroup(k.Group); errors.As(err, &fe) {
		return &gateway.Error{Category: gateway.ErrInvalid, Param: fe.Path, Message: fe.Msg, Err: err}
	}
	secret, prefix, hash, err := keys.Generate()
	if err != nil {
		return err
	}
	if k.ID, err = keys.NewID("key_"); err != nil {
		return err
	}
	k.Prefix, k.Hash, k.CreatedAt = prefix, hash, c.deps.Clock.Now().UTC()
	if err := c.deps.Keys.KeyCreate(r.Context(), k); err != nil {
		if errors.Is(err, weir.ErrInvalid) {
			return &gateway.Error{Category: gateway.ErrInvalid, Message: err.Error()}
		}
		return fmt.Errorf("create key: %w", err)
	}
	c.deps.Logger.Info("key created from the console", "key", k.ID, "name", k.Name)
	w.WriteHeader(http.StatusCreated)
	return writeJSON(w, map[string]any{"id": k.ID, "name": k.Name, "group": k.Group, "secret": secret})
}

func (c *Console) revokeKey(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, err := c.deps.Keys.KeyByID(r.Context(), id); err != nil {
		if errors.Is(err, weir.ErrNotFound) {
			return &gateway.Error{Category: gateway.ErrNotFound, Param: "id", Message: fmt.Sprintf("no key %q", id)}
		}
		return fmt.Errorf("find key %s: %w", id, err)
	}
	if err := c.deps.Keys.KeyRevoke(r.Context(), &weir.KeyRevokeParams{ID: id, At: c.deps.Clock.Now().UTC()}); err != nil {
		return fmt.Errorf("revoke key %s: %w", id, err)
	}
	c.deps.Logger.Warn("key revoked from the console", "key", id)
	return writeJSON(w, map[string]any{"ok": true, "id": id})
}
