package main

import "github.com/urlflow/urlflow/internal/testhttp"

var testClient = testhttp.Client() // not http.DefaultClient (package testhttp says why)
