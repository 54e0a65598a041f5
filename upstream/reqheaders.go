package upstream

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// The headers of a request a delegating service sends through the proxy: its own, less
// those that belong to the connection or that urlflow sets, and those that could carry
// credentials of other kinds unless the API's configuration allows them.

// ErrRequestHeader: a request set a header it may not.
var ErrRequestHeader = errors.New("this header may not be set")

// ErrRequestTooLarge: a request's body is larger than its API's max_request_bytes.
var ErrRequestTooLarge = errors.New("the request body is too large for this API")

// neverSetHeaders belong to the connection (hop-by-hop, RFC 9110 section 7.6.1) or are set
// by urlflow: no configuration lets a request set them.
var neverSetHeaders = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Host", "Content-Length", "Accept-Encoding", "Content-Encoding"}

// RefusedRequestHeaders are refused unless the API's allow_request_headers names them:
// they carry credentials of other kinds, which the user did not give urlflow.
var RefusedRequestHeaders = []string{"Authorization", "Cookie"}

// neverSet reports whether name (canonical) is never a request's to set.
func neverSet(name string) bool { return slices.Contains(neverSetHeaders, name) }

// checkHeaders refuses the headers of h that api does not let a request set: an invalid
// name or value, one that is never a request's (neverSetHeaders), the header the secret is
// injected in (Authorization for basic authentication), and RefusedRequestHeaders that
// api does not allow. The error names a valid header, never a value or an invalid name.
func checkHeaders(api *API, h map[string]string) error {
	injected := textproto.CanonicalMIMEHeaderKey(api.Inject.Header)
	if api.Inject.Basic != nil {
		injected = "Authorization"
	}
	for name, value := range h {
		canonical := textproto.CanonicalMIMEHeaderKey(name)
		switch {
		case !httpguts.ValidHeaderFieldName(name):
			// Not quoted: a name that is not a header's may be anything, the secret too.
			return fmt.Errorf("%w: a header name is not a token (RFC 9110)", ErrRequestHeader)
		case !httpguts.ValidHeaderFieldValue(value):
			return fmt.Errorf("%w: the value of %s holds a line break or a control character", ErrRequestHeader, canonical)
		case neverSet(canonical):
			return fmt.Errorf("%w: %s belongs to the connection or is set by urlflow", ErrRequestHeader, canonical)
		case canonical == injected:
			return fmt.Errorf("%w: %s carries the credential, which urlflow injects", ErrRequestHeader, canonical)
		case slices.Contains(RefusedRequestHeaders, canonical) && !slices.Contains(api.AllowRequestHeaders, canonical):
			return fmt.Errorf("%w: %s carries credentials of another kind; the API's configuration may allow it (api.allow_request_headers)", ErrRequestHeader, canonical)
		case strings.HasPrefix(canonical, "Sec-"):
			return fmt.Errorf("%w: %s is a browser's header", ErrRequestHeader, canonical)
		}
	}
	return nil
}

// CheckOwnParts refuses what api never lets a request send, before anything is read or
// opened: a header it may not set (ErrRequestHeader), a body over its MaxRequestBytes
// (ErrRequestTooLarge), a response header it may not ask for (ErrResponseHeader).
func CheckOwnParts(api *API, req Request) error {
	if err := checkHeaders(api, req.Header); err != nil {
		return err
	}
	if err := checkResponseHeaders(api, req.ResponseHeaders); err != nil {
		return err
	}
	if int64(len(req.Body)) > api.MaxRequestBytes {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrRequestTooLarge, len(req.Body), api.MaxRequestBytes)
	}
	return nil
}

// setHeaders puts the request's own headers h on out, before urlflow's own.
func setHeaders(out http.Header, h map[string]string) {
	for name, value := range h {
		out.Set(name, value)
	}
}
