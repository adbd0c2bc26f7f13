package bench

import (
	"context"
	"errors"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/config"
)

// noKey is a Weir.CreateKey for configs that are only validated.
func noKey(context.Context, weir.Store, *weir.APIKey) (string, error) {
	return "", errors.New("no key in this test")
}

// noStart is a Weir.Start for configs that are only validated.
func noStart(ctx context.Context, _ *config.Config) (Gateway, error) {
	return nil, errors.New("no gateway in this test")
}
