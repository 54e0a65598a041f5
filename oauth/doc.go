// Package oauth establishes who a user is. It verifies the bearer tokens presented to /mcp
// and the API, recognises operator tokens, and provides the development identity of
// `urlflow dev`.
//
// The one idea to hold: a user is an issuer and a subject taken from a verified token,
// never a session ID and never anything a client claims about itself.
package oauth
