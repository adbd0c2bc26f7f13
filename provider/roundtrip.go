package provider

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"unicode/utf8"
)

// checkRedirectPC is CheckRedirect's code, to recognize a client whose
// redirect policy it is.
var checkRedirectPC = reflect.ValueOf(CheckRedirect).Pointer()

// direct reports whether do may send req through hc's transport alone:
// hc's redirect policy is CheckRedirect, which redirects no call but a
// GET or HEAD, and hc has nothing else for Client.Do to do (no cookie
// jar, no timeout) nor req (no user in its URL for basic auth).
func direct(hc *http.Client, req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead:
		return false
	}
	return hc.Jar == nil && hc.Timeout == 0 && hc.CheckRedirect != nil &&
		req.URL != nil && req.URL.User == nil && req.Header != nil && req.RequestURI == "" &&
		reflect.ValueOf(hc.CheckRedirect).Pointer() == checkRedirectPC
}

// do sends req as hc.Do does, and returns what it returns. A call that
// hc's policy never redirects (direct) goes through the transport's
// RoundTrip: Client.Do's work for the redirects it could follow (a copy
// of the request's headers for the next hop, a closure, their
// allocations) then buys nothing. The answer is the same: the response
// whatever its status, a redirect refused as CheckRedirect refuses it
// (its body read up to 2 KiB and closed, so that the connection is kept),
// and an error wrapped in a *url.Error naming the method and the URL.
func do(hc *http.Client, req *http.Request) (*http.Response, error) {
	if !direct(hc, req) {
		return hc.Do(req)
	}
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		if tlsErr, ok := err.(tls.RecordHeaderError); ok && string(tlsErr.RecordHeader[:]) == "HTTP/" {
			err = http.ErrSchemeMismatch
		}
		return nil, urlError(req, nil, err)
	}
	if resp == nil {
		return nil, urlError(req, nil, fmt.Errorf("http: RoundTripper implementation (%T) returned a nil *Response with a nil error", rt))
	}
	if resp.Body == nil {
		if resp.ContentLength > 0 {
			return nil, urlError(req, nil, fmt.Errorf("http: RoundTripper implementation (%T) returned a *Response with content length %d but a nil Body", rt, resp.ContentLength))
		}
		resp.Body = io.NopCloser(strings.NewReader(""))
	}
	return refuseRedirect(req, resp)
}

// refuseRedirect is Client.Do's answer to resp, the first answer to req,
// under CheckRedirect: resp itself unless it is a redirect Client.Do
// would follow, which CheckRedirect refuses.
func refuseRedirect(req *http.Request, resp *http.Response) (*http.Response, error) {
	method := req.Method
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther:
		method = http.MethodGet // req is not a GET or HEAD
	case http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		if req.GetBody == nil && outgoingLength(req) != 0 {
			return resp, nil // the body cannot be sent again
		}
	default:
		return resp, nil
	}
	closeBody(req)
	loc := resp.Header.Get("Location")
	if loc == "" {
		return resp, nil
	}
	u, err := req.URL.Parse(loc)
	if err != nil {
		resp.Body.Close()
		return nil, urlError(req, resp, fmt.Errorf("failed to parse Location header %q: %v", loc, err))
	}
	hop := &http.Request{Method: method, Response: resp, URL: u, Header: make(http.Header)}
	err = CheckRedirect(hop, []*http.Request{req})
	const maxBodySlurpSize = 2 << 10
	if resp.ContentLength == -1 || resp.ContentLength <= maxBodySlurpSize {
		_, _ = io.CopyN(io.Discard, resp.Body, maxBodySlurpSize)
	}
	resp.Body.Close()
	ue := urlError(req, resp, err)
	ue.URL = loc
	return resp, ue
}

// urlError wraps err as Client.Do does: the request's method and the URL
// of resp's request if there is one, else req's.
func urlError(req *http.Request, resp *http.Response, err error) *url.Error {
	u := req.URL
	if resp != nil && resp.Request != nil {
		u = resp.Request.URL
	}
	return &url.Error{Op: urlErrorOp(req.Method), URL: u.String(), Err: err}
}

// urlErrorOp is net/http's name of method in a *url.Error: "Post" for
// POST; a method not all ASCII as it is. direct passes no empty one.
func urlErrorOp(method string) string {
	for i := 0; i < len(method); i++ {
		if method[i] >= utf8.RuneSelf {
			return method
		}
	}
	return method[:1] + strings.ToLower(method[1:])
}

// outgoingLength is the length of req's body as the transport sends it:
// 0 for none, -1 if unknown.
func outgoingLength(req *http.Request) int64 {
	if req.Body == nil || req.Body == http.NoBody {
		return 0
	}
	if req.ContentLength != 0 {
		return req.ContentLength
	}
	return -1
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
