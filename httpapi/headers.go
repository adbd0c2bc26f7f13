package httpapi

import (
	"fmt"
	"net/http"
)

// oneHeader is the value of a request header that may be given at most
// once: given twice (say "2" and "-1"), which one counts would depend on
// who reads it, so the request is refused.
func oneHeader(r *http.Request, name string) (string, *apiError) {
	vs := r.Header.Values(name)
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], nil
	}
	return "", errorf(CodeInvalidRequest, name, fmt.Sprintf("the %s header is given %d times; give it once", name, len(vs)))
}
