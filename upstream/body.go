package upstream

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/andybalholm/brotli"

	"github.com/urlflow/urlflow/state"
)

// acceptEncoding is the Accept-Encoding of every request. do sets it so that net/http's
// Transport leaves the body as it came: the Transport undoes gzip only when it asked for
// it itself, and then one layer only, judged by the first Content-Encoding line, whose
// lines it all deletes, so that a body gzipped twice in two lines came back still
// compressed with nothing saying so. readBody undoes every coding itself.
const acceptEncoding = "gzip"

// maxCodings bounds the content codings undone in one response ("gzip, br" is two).
const maxCodings = 3

// readBody returns resp's body as the API meant it: its Content-Encoding (gzip or x-gzip,
// deflate, br, or several of them in turn) undone, and refused with ErrTooLarge when it is
// longer once decoded than what api.MaxResponseBytes leaves of the headers Call returns
// (selectedHeaders of want); when those alone are longer, the body is not read. A body the API
// compressed without being asked is decoded all the same; one in any other coding (zstd,
// compress), or that does not decode, is refused with ErrEncoding, since urlflow returns
// nothing it could not check for the secret. An empty body is empty whatever its coding
// says. When it undoes a coding, readBody removes Content-Encoding and Content-Length from
// resp's headers, as they describe the body no longer.
func readBody(ctx context.Context, api *API, secret state.Secret, r *redactor, want []string, resp *http.Response) ([]byte, error) {
	codings, unknown := contentCodings(resp.Header)
	switch {
	case unknown != "":
		// The API chose the name; it could quote the secret.
		unknown = r.text.replace(unknown)
		return nil, fmt.Errorf("%w: Content-Encoding %q (urlflow reads gzip, deflate and br)", ErrEncoding, unknown)
	case len(codings) > maxCodings:
		return nil, fmt.Errorf("%w: %d content codings one over the other (urlflow undoes at most %d)", ErrEncoding, len(codings), maxCodings)
	}
	if len(codings) > 0 {
		resp.Header.Del("Content-Encoding")
		resp.Header.Del("Content-Length")
	}
	limit := api.MaxResponseBytes - headersSize(selectedHeaders(api, want, resp))
	if limit < 0 {
		return nil, fmt.Errorf("%w: the headers urlflow returns take more than %d bytes on their own; it returns at most that much, body and headers together", ErrTooLarge, api.MaxResponseBytes)
	}
	src := &source{r: resp.Body}
	body, err := decode(src, codings, limit+1)
	switch {
	case src.err != nil:
		return nil, transportError(ctx, api, secret, src.err)
	case err != nil:
		return nil, fmt.Errorf("%w: the body does not decode as %s", ErrEncoding, strings.Join(codings, ", "))
	case int64(len(body)) > limit:
		return nil, fmt.Errorf("%w: the body and the headers urlflow returns take more than %d bytes; it returns at most that much", ErrTooLarge, api.MaxResponseBytes)
	}
	return body, nil
}

// headersSize returns the size of headers by the rule of max_response_bytes: the length of
// each name and of its value.
func headersSize(headers map[string]string) int64 {
	var n int64
	for name, v := range headers {
		n += int64(len(name) + len(v))
	}
	return n
}

// contentCodings returns the codings of h's Content-Encoding in the order the API applied
// them, identity left out, or the first one urlflow cannot undo.
func contentCodings(h http.Header) (codings []string, unknown string) {
	for _, v := range h.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			switch c = strings.ToLower(strings.TrimSpace(c)); c {
			case "", "identity":
			case "gzip", "x-gzip", "deflate", "br":
				codings = append(codings, c)
			default:
				return nil, c
			}
		}
	}
	return codings, ""
}

// decode reads r with codings undone, last applied first, and returns at most limit bytes.
func decode(r io.Reader, codings []string, limit int64) ([]byte, error) {
	buffered := bufio.NewReader(r)
	if _, err := buffered.Peek(1); err != nil {
		return nil, ignoreEOF(err)
	}
	r = buffered
	for _, c := range slices.Backward(codings) {
		var err error
		if r, err = decoder(c, r); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(r, limit))
}

// decoder returns a reader of r with coding undone.
func decoder(coding string, r io.Reader) (io.Reader, error) {
	switch coding {
	case "gzip", "x-gzip":
		return gzip.NewReader(r)
	case "br":
		return brotli.NewReader(r), nil
	}
	// deflate is zlib (RFC 9110), but some servers send raw deflate: tell them apart by
	// zlib's header, as browsers do.
	buffered := bufio.NewReader(r)
	if h, err := buffered.Peek(2); err == nil && h[0]&0x0f == 8 && (uint16(h[0])<<8|uint16(h[1]))%31 == 0 {
		return zlib.NewReader(buffered)
	}
	return flate.NewReader(buffered), nil
}

// ignoreEOF returns err, or nil for io.EOF.
func ignoreEOF(err error) error {
	if err == io.EOF {
		return nil
	}
	return err
}

// source reads the body as it comes from the API, and keeps the first error of that read,
// which is the transport's, not a decoder's.
type source struct {
	r   io.Reader
	err error
}

func (s *source) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF && s.err == nil {
		s.err = err
	}
	return n, err
}
