// Package header reads HTTP headers whose names are known in canonical
// form.
package header

import "net/http"

// Get is h.Get(key) for a key in canonical form
// (textproto.CanonicalMIMEHeaderKey's): the server and the transport
// store header names so, and the map is read as it is, without Get
// canonicalizing key again on every call.
func Get(h http.Header, key string) string {
	if vs := h[key]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}
