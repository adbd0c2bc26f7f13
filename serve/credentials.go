package serve

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/keys"
)

// CreateKey fills in k's id, secret hash and creation time, stores it and
// returns the secret: `weir keys create`, and the keys the demo and the
// benchmark harness make.
func CreateKey(ctx context.Context, store weir.Store, k *weir.APIKey) (string, error) {
	secret, prefix, hash, err := keys.Generate()
	if err != nil {
		return "", err
	}
	if k.ID, err = keys.NewID("key_"); err != nil {
		return "", err
	}
	k.Prefix, k.Hash = prefix, hash
	k.CreatedAt = time.Now().UTC()
	if err := store.KeyCreate(ctx, *k); err != nil {
		return "", err
	}
	return secret, nil
}

// CreateNode makes a node named name, created at now, with a new token,
// stores it and returns it with the token: `weir nodes create`, and the
// node the benchmark harness's edge target dials in as.
func CreateNode(ctx context.Context, store weir.NodeStore, name string, now time.Time) (weir.Node, string, error) {
	token, prefix, hash, err := keys.GenerateNodeToken()
	if err != nil {
		return weir.Node{}, "", err
	}
	id, err := keys.NewID(weir.NodeIDPrefix)
	if err != nil {
		return weir.Node{}, "", err
	}
	n := weir.Node{
		ID:        id,
		Name:      name,
		Prefix:    prefix,
		Hash:      hash,
		CreatedAt: now.UTC(),
	}
	if err := n.Validate(); err != nil {
		return weir.Node{}, "", fmt.Errorf("create node: %w", err)
	}
	if err := store.NodeCreate(ctx, n); err != nil {
		if errors.Is(err, weir.ErrConflict) {
			if _, ferr := FindNode(ctx, store, name); ferr == nil {
				return weir.Node{}, "", fmt.Errorf("create node: a node named %q exists already (a revoked node keeps its name); choose another: %w",
					name, weir.ErrConflict)
			}
		}
		return weir.Node{}, "", err
	}
	return n, token, nil
}

// FindNode finds a node by its ID if arg has the shape of one (a name
// never has), else by its name.
func FindNode(ctx context.Context, store weir.NodeStore, arg string) (weir.Node, error) {
	notFound := fmt.Errorf("no node with id or name %q (weir nodes list shows them): %w", arg, weir.ErrNotFound)
	if weir.ValidNodeID(arg) {
		n, err := store.NodeByID(ctx, arg)
		if errors.Is(err, weir.ErrNotFound) {
			return weir.Node{}, notFound
		}
		return n, err
	}
	// No lookup by name in the store: nodes are few, and the listing is
	// what the operator reads names from anyway.
	ns, err := store.NodeList(ctx)
	if err != nil {
		return weir.Node{}, err
	}
	for _, n := range ns {
		if n.Name == arg {
			return n, nil
		}
	}
	return weir.Node{}, notFound
}
