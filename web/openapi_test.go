package web

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/labstack/echo/v4"
)

// The API under /api/v1 is described by docs/openapi.yaml, and every exchange a test of
// this package has with it (fixture.send) is checked against that description
// (checkAPIExchange): the answer always, the request when the server accepted it.

// openAPIFile is docs/openapi.yaml, from this package's directory.
const openAPIFile = "../docs/openapi.yaml"

// apiPrefix is where the API is served; the description's server URL.
const apiPrefix = "/api/v1"

// openAPI is the loaded description and a router over it.
type openAPI struct {
	doc    *openapi3.T
	router routers.Router
}

// loadOpenAPI loads and validates docs/openapi.yaml, once.
var loadOpenAPI = sync.OnceValues(func() (*openAPI, error) {
	// The audit export is JSON Lines, which the description calls a string.
	openapi3filter.RegisterBodyDecoder("application/x-ndjson", openapi3filter.FileBodyDecoder)
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(openAPIFile)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", openAPIFile, err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("%s is not a valid OpenAPI document: %w", openAPIFile, err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route %s: %w", openAPIFile, err)
	}
	return &openAPI{doc: doc, router: router}, nil
})

// apiExchanges counts the exchanges checkAPIExchange validated in this run.
var apiExchanges atomic.Int64

func TestMain(m *testing.M) {
	code := m.Run()
	if n := apiExchanges.Load(); n > 0 {
		fmt.Printf("openapi: %d exchanges with %s validated against %s\n", n, apiPrefix, openAPIFile)
	}
	os.Exit(code)
}

func TestOpenAPIDocumentIsValid(t *testing.T) {
	t.Parallel()
	if _, err := loadOpenAPI(); err != nil {
		t.Fatal(err)
	}
}

// Every route the server has under /api/v1 is described, with its method.
func TestEveryAPIRouteIsDescribed(t *testing.T) {
	t.Parallel()
	spec, err := loadOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, fixtureOptions{})
	served := map[string]bool{}
	for _, r := range f.server.echo.Routes() {
		path, ok := strings.CutPrefix(r.Path, apiPrefix)
		if !ok || r.Method == echo.RouteNotFound {
			continue
		}
		path = openAPIPath(path)
		served[r.Method+" "+path] = true
		item := spec.doc.Paths.Find(path)
		if item == nil || item.GetOperation(r.Method) == nil {
			t.Errorf("%s %s%s is served but not described in %s", r.Method, apiPrefix, path, openAPIFile)
		}
	}
	for path, item := range spec.doc.Paths.Map() {
		for method := range item.Operations() {
			if !served[method+" "+path] {
				t.Logf("%s %s%s is described but not served (yet)", method, apiPrefix, path)
			}
		}
	}
}

// openAPIPath turns echo's path parameters (":id") into OpenAPI's ("{id}").
func openAPIPath(path string) string {
	segments := strings.Split(path, "/")
	for i, s := range segments {
		if name, ok := strings.CutPrefix(s, ":"); ok {
			segments[i] = "{" + name + "}"
		}
	}
	return strings.Join(segments, "/")
}

// bufferBody reads a request body that is in memory (what the tests send) and returns a
// reader of the same bytes to send instead, and the bytes. Any other reader (one that
// could be slow or endless) is returned as it is, with nil bytes: what it sends is not
// known, and checkAPIExchange does not check that request. No body is empty bytes.
func bufferBody(body io.Reader) (io.Reader, []byte) {
	switch body.(type) {
	case nil:
		return nil, []byte{}
	case *strings.Reader, *bytes.Reader, *bytes.Buffer:
		data, err := io.ReadAll(body)
		if err != nil { // cannot happen: these readers never fail
			panic(err)
		}
		return bytes.NewReader(data), data
	}
	return body, nil
}

// checkAPIExchange checks an exchange with the API against docs/openapi.yaml: req was sent
// with the body sent (nil when not known) and answered status with header and body.
//
// The answer must be described: its status for the operation, and its headers and body.
// The request is checked too, but a request the description calls invalid may be sent
// on purpose to see it refused: it fails the test only if the server accepted it (2xx).
// A path or method not described fails the test unless the answer is 404 or 405.
// Security is not checked here: the tests of the bearer check do that.
//
// Safe to call from any goroutine: it never stops the test.
func checkAPIExchange(t testing.TB, req *http.Request, sent []byte, status int, header http.Header, body []byte) {
	t.Helper()
	if req.URL.Path != apiPrefix && !strings.HasPrefix(req.URL.Path, apiPrefix+"/") {
		return
	}
	spec, err := loadOpenAPI()
	if err != nil {
		t.Error(err)
		return
	}
	what := fmt.Sprintf("%s %s (answered %d)", req.Method, req.URL.RequestURI(), status)
	ctx := context.Background()
	route, params, err := spec.router.FindRoute(req)
	if err != nil {
		if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
			t.Errorf("openapi: %s: not described in %s: %v", what, openAPIFile, err)
		}
		return
	}
	options := &openapi3filter.Options{
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
		IncludeResponseStatus: true,
		MultiError:            true,
	}
	if sent != nil {
		checked := req.Clone(ctx)
		// A body of white space only is no body: the retry endpoint takes it as none.
		if len(bytes.TrimSpace(sent)) == 0 {
			checked.Body, checked.ContentLength = http.NoBody, 0
			checked.Header.Del("Content-Type")
		} else {
			checked.Body, checked.ContentLength = io.NopCloser(bytes.NewReader(sent)), int64(len(sent))
		}
		err := openapi3filter.ValidateRequest(ctx, &openapi3filter.RequestValidationInput{
			Request: checked, PathParams: params, Route: route, Options: options,
		})
		if err != nil && status >= 200 && status < 300 {
			t.Errorf("openapi: %s: the server accepted a request that %s calls invalid: %v\nbody: %s", what, openAPIFile, err, sent)
		}
	}
	answer := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route, Options: options,
		},
		Status:  status,
		Header:  header,
		Options: options,
	}
	answer.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(ctx, answer); err != nil {
		t.Errorf("openapi: %s: the answer is not as %s describes it: %v\nbody: %s", what, openAPIFile, err, body)
		return
	}
	apiExchanges.Add(1)
}
