package mcp

import (
	"net/http"

	"github.com/urlflow/urlflow/internal/testhttp"
)

// Not net/http's defaults (package testhttp says why).
var (
	testTransport = testhttp.Transport()
	testHTTP      = &http.Client{Transport: testTransport}
)
