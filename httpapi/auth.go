package httpapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/adminauth"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/keys"
)

// authenticate finds the caller's key. Missing, unknown and revoked keys get
// the same 401, so a caller learns nothing about which keys exist.
func (s *Server) authenticate(r *http.Request) (weir.APIKey, *apiError) {
	secret := adminauth.Bearer(r)
	if secret == "" {
		secret = r.Header.Get("X-Api-Key")
	}
	denied := errorf(weir.CodeUnauthorized, "", "invalid or missing API key")
	if secret == "" {
		return weir.APIKey{}, denied
	}
	k, found, err := s.deps.Gateway.KeyByHash(r.Context(), keys.Hash(secret))
	if err != nil {
		info(r.Context()).log().Error("key lookup failed", "error", err)
		if errors.Is(err, gateway.ErrUnavailable) {
			return weir.APIKey{}, &apiError{Code: weir.CodeStoreUnavailable, Message: "the key store cannot be reached; retry shortly", RetryAfter: time.Second}
		}
		return weir.APIKey{}, errorf(weir.CodeInternal, "", "key lookup failed")
	}
	if !found || !k.Active() {
		return weir.APIKey{}, denied
	}
	return k, nil
}
