package httpapi

import (
	"errors"
	"net/http"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/adminauth"
	"github.com/weir-gateway/weir/gateway"
)

// authenticate finds the caller's key (gateway.Authenticate) by the
// bearer token or the X-Api-Key header; a lookup that failed, rather than
// found no active key, is logged.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (weir.APIKey, error) {
	secret := adminauth.Bearer(r)
	if secret == "" {
		secret = r.Header.Get("X-Api-Key")
	}
	k, err := s.deps.Gateway.Authenticate(r.Context(), secret)
	if err != nil && !errors.Is(err, gateway.ErrUnauthorized) {
		logLookupFailed(w, err)
	}
	if err == nil {
		noteKey(w, k)
	}
	return k, err
}

// logLookupFailed logs err, a key lookup that failed. It is not
// authenticate's own code so that the logging's arguments take no room
// in authenticate's frame, on every request's way to the queue.
//
//go:noinline
func logLookupFailed(w http.ResponseWriter, err error) {
	infoOf(w).log().Error("key lookup failed", "error", causeOf(err))
}
