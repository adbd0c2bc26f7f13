package bench

import (
	"context"
	"errors"

	"github.com/weir-gateway/weir"
)

// noKey is a Weir.CreateKey for configs that are only validated.
func noKey(context.Context, weir.Store, *weir.APIKey) (string, error) {
	return "", errors.New("no key in this test")
}
