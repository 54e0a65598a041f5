// Package testhttp gives tests an HTTP transport and client of their own instead of
// net/http's defaults. Every httptest.Server's Close closes the idle connections of
// http.DefaultTransport, so a test whose request was in flight on one of them, while a
// parallel test's server closed, failed with "CloseIdleConnections called".
package testhttp

import "net/http"

// Transport returns a transport like http.DefaultTransport that no other test shares.
func Transport() *http.Transport { return http.DefaultTransport.(*http.Transport).Clone() }

// Client returns a client on a Transport of its own.
func Client() *http.Client { return &http.Client{Transport: Transport()} }
