package httpapi

import (
	"fmt"
	"net/http"

	"github.com/weir-gateway/weir"
)

// Bounds of client strings that are stored, compared or echoed: longer
// ones are refused with 400 naming the field, not stored or logged whole.
const (
	// maxIdempotencyKey is the longest Idempotency-Key, as Stripe's (255
	// characters) and common practice around the IETF draft.
	maxIdempotencyKey = 255
	// maxCallbackURL is the longest callback URL (2 KiB, a common
	// practical bound of URLs).
	maxCallbackURL = 2048
	// maxModelName is the longest model name a request may give.
	maxModelName = 256
)

// oneHeader is the value of a request header that may be given at most
// once: given twice (say "2" and "-1"), which one counts would depend on
// who reads it, so the request is refused.
func oneHeader(r *http.Request, name string) (string, *apiError) {
	return oneValue(r.Header.Values(name), name)
}

// canonicalHeader is oneHeader of a name in its canonical form
// (textproto.CanonicalMIMEHeaderKey's, as the server stores a request's
// header names): read from the map as it is, not canonicalized again.
func canonicalHeader(r *http.Request, name string) (string, *apiError) {
	return oneValue(r.Header[name], name)
}

// oneValue is the value of the header name whose values are vs, as
// oneHeader answers it.
func oneValue(vs []string, name string) (string, *apiError) {
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], nil
	}
	return "", errorf(weir.CodeInvalidRequest, name, fmt.Sprintf("the %s header is given %d times; give it once", name, len(vs)))
}

// idempotencyKeyOf is the request's Idempotency-Key, "" if it has none: at
// most maxIdempotencyKey characters of printable ASCII, given once.
func idempotencyKeyOf(r *http.Request) (string, *apiError) {
	v, aerr := oneHeader(r, HeaderIdempotencyKey)
	if aerr != nil {
		return "", aerr
	}
	if len(v) > maxIdempotencyKey {
		return "", errorf(weir.CodeInvalidRequest, HeaderIdempotencyKey, fmt.Sprintf("the Idempotency-Key is %d bytes long; at most %d are allowed", len(v), maxIdempotencyKey))
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' || c > '~' {
			return "", errorf(weir.CodeInvalidRequest, HeaderIdempotencyKey, "the Idempotency-Key must be printable ASCII")
		}
	}
	return v, nil
}
